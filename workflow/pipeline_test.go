package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// pipelineJournal is the in-memory journal with a slow commit of every
// transaction that journals calls (so that a send started before its
// record's commit runs while the commit waits, and is seen), a log of what
// each transaction held, and an optional failure of the n-th such commit.
type pipelineJournal struct {
	*workflowtest.Journal
	mu  sync.Mutex
	txs []pipelineTx
	// fail, when set, is called on the commit of calls number n (from 1)
	// instead of committing it; its error is the commit's.
	fail        func(n int) error
	callCommits int
}

type pipelineTx struct {
	from, to       store.State
	calls, results int
}

func (j *pipelineJournal) Transition(ctx context.Context, p store.TransitionParams) (*store.Operation, error) {
	tx := pipelineTx{from: p.From, to: p.To}
	for _, r := range p.Records {
		switch r.Kind {
		case store.RecordAuthorityCall:
			tx.calls++
		case store.RecordAuthorityResult:
			tx.results++
		}
	}
	if tx.calls > 0 {
		j.mu.Lock()
		j.callCommits++
		n := j.callCommits
		j.mu.Unlock()
		if j.fail != nil {
			if err := j.fail(n); err != nil {
				return nil, err
			}
		}
		time.Sleep(5 * time.Millisecond) // a send that overtakes this commit runs now
	}
	op, err := j.Journal.Transition(ctx, p)
	if err == nil {
		j.mu.Lock()
		j.txs = append(j.txs, tx)
		j.mu.Unlock()
	}
	return op, err
}

// batchFamily decides one batch of n creates, then completes. Every send
// first reads the journal (a snapshot, as another process would) and
// notes a call whose record it does not find committed there.
type batchFamily struct {
	j     *pipelineJournal
	n     int
	mu    sync.Mutex
	sends map[string]int
	// unjournaled lists the sends that found no committed record.
	unjournaled []string
	// hold, when set, is waited for by every send.
	hold     chan struct{}
	finished atomic.Int32
	// then: after the batch, one more (final) call.
	then    bool
	decided int
}

func (f *batchFamily) Decide(_ context.Context, run *workflow.Run) (workflow.Decision, error) {
	f.decided++
	if last, ok := run.LastCall(); ok {
		if f.then && last.Step != "then" {
			return workflow.Decision{Call: &workflow.Call{Step: "then", Target: store.SecretTarget("ns", "last"), Verb: workflow.VerbCreate, Final: true,
				Send: func(context.Context) workflow.Answer { return workflow.Answer{Status: workflow.Applied, Code: 201} }}}, nil
		}
		return workflow.Decision{Complete: &workflow.Completion{Outcome: workflow.OutcomeCompleted}}, nil
	}
	calls := make([]*workflow.Call, f.n)
	for i := range calls {
		target := store.SecretTarget("ns", fmt.Sprintf("s-%02d", i))
		mutation := run.Op.MutationID
		calls[i] = &workflow.Call{Step: "create", Target: target, Verb: workflow.VerbCreate, Digest: fmt.Sprintf("sha256:%064d", i),
			Send: func(ctx context.Context) workflow.Answer {
				_, records, err := f.j.Journal.Snapshot(ctx, "", mutation)
				journaled := err == nil && func() bool {
					for _, r := range records {
						if r.Kind == store.RecordAuthorityCall && r.Target.String() == target.String() {
							return true
						}
					}
					return false
				}()
				f.mu.Lock()
				f.sends[target.String()]++
				if !journaled {
					f.unjournaled = append(f.unjournaled, target.String())
				}
				f.mu.Unlock()
				if f.hold != nil {
					select {
					case <-f.hold:
					case <-time.After(10 * time.Second): // a build that never fails the commit must not hang
					}
				}
				f.finished.Add(1)
				return workflow.Answer{Status: workflow.Applied, Code: 201, Reason: "created"}
			}}
	}
	return workflow.Decision{Calls: calls}, nil
}

func (f *batchFamily) Resolve(context.Context, *workflow.Run, store.Record) (workflow.Verdict, error) {
	return workflow.Verdict{Kind: workflow.Ours, Reason: "found"}, nil
}

func (f *batchFamily) ConfirmReplay(context.Context, *workflow.Run) (*workflow.Contradiction, error) {
	return nil, nil
}

// A batch larger than one chunk is journaled and sent in chunks: the
// first chunk's records move the operation to calling, each later chunk's
// are committed (with the answers arrived by then) while the chunks before
// it are in flight, and no call is sent before its record is committed.
// The batch stays one batch: one number, every call sent once, every
// answer journaled once, and the run ends as a batch sent at once does.
func TestPipelineSendsOnlyJournaledCalls(t *testing.T) {
	t.Parallel()
	j := &pipelineJournal{Journal: workflowtest.NewJournal()}
	f := &batchFamily{j: j, n: 20, sends: map[string]int{}}
	res, err := workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: f}, nil)
	require.NoError(t, err)
	require.Equal(t, workflow.OutcomeCompleted, res.Outcome)
	require.Empty(t, f.unjournaled, "every call's record is committed before it is sent")
	require.Len(t, f.sends, 20)
	for target, n := range f.sends {
		require.Equal(t, 1, n, "%s sent once", target)
	}
	var calls, results int
	for _, tx := range j.txs {
		calls, results = calls+tx.calls, results+tx.results
	}
	require.Equal(t, 20, calls)
	require.Equal(t, 20, results, "every answer journaled once")
	require.Equal(t, pipelineTx{from: store.StatePrepared, to: store.StateCalling, calls: 8}, j.txs[0], "the first chunk moves to calling")
	require.Equal(t, store.StateCalling, j.txs[1].from)
	require.Equal(t, store.StateCalling, j.txs[1].to)
	require.Equal(t, 12, j.txs[1].calls, "the rest: less than two chunks")
	last := j.txs[len(j.txs)-1]
	require.Equal(t, store.StateCalling, last.from)
	require.Equal(t, store.StateCompleted, last.to, "the batch's last answers go with the completion its next decision made")
	require.Positive(t, last.results)
	require.Equal(t, 2, f.decided, "the batch, then the completion, asked once")
	for _, tx := range j.txs[2 : len(j.txs)-1] {
		require.Equal(t, pipelineTx{from: store.StateCalling, to: store.StateCalling, results: tx.results}, tx, "answers only, in calling")
		require.GreaterOrEqual(t, tx.results, 8, "8 or more at a time")
	}
	_, records, err := j.Snapshot(t.Context(), "", "m")
	require.NoError(t, err)
	for _, r := range records {
		if r.Kind == store.RecordAuthorityCall {
			require.Equal(t, 1, r.Batch, "one batch")
			require.Equal(t, 1, r.Attempt)
		}
	}
}

// A pipelined batch whose next decision is not a completion: its answers
// are committed (answered), and that decision, made with them in view, is
// carried out without asking the family again.
func TestPipelineCarriesOutTheDecisionAhead(t *testing.T) {
	t.Parallel()
	j := &pipelineJournal{Journal: workflowtest.NewJournal()}
	f := &batchFamily{j: j, n: 20, sends: map[string]int{}, then: true}
	res, err := workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: f}, nil)
	require.NoError(t, err)
	require.Equal(t, workflow.OutcomeCompleted, res.Outcome)
	require.Equal(t, 2, f.decided, "the batch, then the final call: asked once each")
	var moves []string
	for _, tx := range j.txs {
		if tx.from != tx.to {
			moves = append(moves, string(tx.from)+"->"+string(tx.to))
		}
	}
	require.Equal(t, []string{"prepared->calling", "calling->answered", "answered->calling", "calling->completed"}, moves)
	_, records, err := j.Snapshot(t.Context(), "", "m")
	require.NoError(t, err)
	require.Equal(t, 21, workflowtest.Count(records, store.RecordAuthorityResult))
}

// A chunk whose commit fails is never sent, and the run returns only once
// the chunks in flight have answered: nothing is sent after it ends. The
// journal holds the first chunk in calling, which the next process
// resolves.
func TestPipelineStopsAtAFailedCommit(t *testing.T) {
	t.Parallel()
	j := &pipelineJournal{Journal: workflowtest.NewJournal()}
	f := &batchFamily{j: j, n: 20, sends: map[string]int{}, hold: make(chan struct{})}
	gone := errors.New("journal gone")
	j.fail = func(n int) error {
		if n != 2 {
			return nil
		}
		close(f.hold) // the first chunk answers only now
		return gone
	}
	res, err := workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: f}, nil)
	require.ErrorIs(t, err, gone)
	require.Equal(t, workflow.OutcomeUncertain, res.Outcome)
	require.Equal(t, int32(8), f.finished.Load(), "the first chunk's sends ended before the run did")
	require.Len(t, f.sends, 8, "only the first chunk was sent")
	for i := range 8 {
		require.Equal(t, 1, f.sends[store.SecretTarget("ns", fmt.Sprintf("s-%02d", i)).String()])
	}
	require.Empty(t, f.unjournaled)
	op, records, err := j.Snapshot(t.Context(), "", "m")
	require.NoError(t, err)
	require.Equal(t, store.StateCalling, op.State)
	require.Equal(t, 8, workflowtest.Count(records, store.RecordAuthorityCall))
	require.Zero(t, workflowtest.Count(records, store.RecordAuthorityResult), "the answers of the first chunk are not journaled")

	// The next process settles the first chunk from the durable facts,
	// without sending it again.
	next := &batchFamily{j: j, n: 20, sends: map[string]int{}}
	res, err = workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: next}, nil)
	require.NoError(t, err)
	require.Equal(t, workflow.OutcomeCompleted, res.Outcome)
	require.Empty(t, next.sends, "resolved, never sent again")
}
