package workflow_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// endsWhileJoined is a journal on which another process ends the run
// PrepareRun hands back, right after handing it back (before this process
// reads it), the first time.
type endsWhileJoined struct {
	*workflowtest.Journal
	t     *testing.T
	ended bool
}

func (j *endsWhileJoined) PrepareRun(ctx context.Context, p store.PrepareParams) (*store.Operation, bool, error) {
	op, created, err := j.Journal.PrepareRun(ctx, p)
	if err == nil && !created && !j.ended {
		j.ended = true
		_, terr := j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: op.State, To: store.StateCompleted,
			Revision: op.Revision, Outcome: string(workflow.OutcomeExisting),
			Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete", Status: store.Status(workflow.OutcomeExisting)}}})
		require.NoError(j.t, terr)
	}
	return op, created, err
}

// TestOperateJoinsTheNextRunWhenTheHandedRunEnded: a desired-state run
// handed an unfinished run that the process driving it ends before this
// one reads it prepares the next run and drives that one: it neither
// replays the other process's run nor asks the family to confirm it.
func TestOperateJoinsTheNextRunWhenTheHandedRunEnded(t *testing.T) {
	t.Parallel()
	j := &endsWhileJoined{Journal: workflowtest.NewJournal(), t: t}
	_, created, err := j.Journal.PrepareRun(t.Context(), toy("m"))
	require.NoError(t, err)
	require.True(t, created, "run 1, left unfinished")
	decided := 0
	family := &scripted{decide: func(*workflow.Run, func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
		decided++
		return workflow.Decision{Complete: &workflow.Completion{Outcome: workflow.OutcomeExisting}}
	}, resolve: noResolve}
	res, err := workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: family, Runs: true}, nil)
	require.NoError(t, err)
	require.True(t, j.ended, "the handed run was ended by another process")
	require.False(t, res.Replayed)
	require.Equal(t, "m:run-2", res.Run.Op.MutationID, "the next run")
	require.Equal(t, store.StateCompleted, res.Run.Op.State)
	require.Equal(t, 1, decided)
	require.Zero(t, family.confirmed, "nothing replayed")
}

// losesCallCommits is a journal on which another process moves the
// operation first, the first n times this one commits a call.
type losesCallCommits struct {
	*workflowtest.Journal
	n int
}

func (j *losesCallCommits) Transition(ctx context.Context, p store.TransitionParams) (*store.Operation, error) {
	if p.To == store.StateCalling && j.n > 0 {
		j.n--
		return nil, store.ErrStateMoved
	}
	return j.Journal.Transition(ctx, p)
}

// TestACallLostToAnotherProcessIsNotASend: a call whose records lost the
// commit to another process (the state moved) was never sent; deciding it
// again after the reload, more often than MaxAttempts, does not exhaust
// its attempts.
func TestACallLostToAnotherProcessIsNotASend(t *testing.T) {
	t.Parallel()
	j := &losesCallCommits{Journal: workflowtest.NewJournal(), n: 4}
	family := &scripted{decide: func(_ *workflow.Run, send func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
		return workflow.Decision{Call: &workflow.Call{Step: "write", Target: store.Target{Kind: "secret", Name: "x"}, Final: true,
			Send: send(workflow.Answer{Status: workflow.Applied, UID: "u1"})}}
	}, resolve: noResolve}
	res, err := workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: family, MaxAttempts: 3}, nil)
	require.NoError(t, err)
	require.Equal(t, workflow.OutcomeCompleted, res.Outcome)
	require.Equal(t, 1, family.sent)
}

// endsEveryJoin ends every unfinished run it hands back, as a crowd of
// processes finishing runs as fast as this one joins them would.
type endsEveryJoin struct {
	*workflowtest.Journal
	t        *testing.T
	prepares int
}

func (j *endsEveryJoin) PrepareRun(ctx context.Context, p store.PrepareParams) (*store.Operation, bool, error) {
	j.prepares++
	op, _, err := j.Journal.PrepareRun(ctx, p)
	require.NoError(j.t, err)
	if !op.State.Terminal() {
		_, terr := j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: op.State, To: store.StateCompleted,
			Revision: op.Revision, Outcome: string(workflow.OutcomeExisting),
			Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete", Status: store.Status(workflow.OutcomeExisting)}}})
		require.NoError(j.t, terr)
	}
	return op, false, nil
}

// TestOperateJoinsABoundedNumberOfTimes: when every run handed back ends
// before it is read, Operate prepares again at most maxRunJoins times and
// then treats the last one as what it is, a run that ended (a replay the
// family is asked to confirm): it never loops.
func TestOperateJoinsABoundedNumberOfTimes(t *testing.T) {
	t.Parallel()
	j := &endsEveryJoin{Journal: workflowtest.NewJournal(), t: t}
	family := &scripted{decide: func(*workflow.Run, func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
		t.Fatal("no run is left to decide in")
		return workflow.Decision{}
	}, resolve: noResolve}
	res, _ := workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: family, Runs: true}, nil)
	require.Equal(t, 4, j.prepares, "the first PrepareRun and maxRunJoins (3) more")
	require.True(t, res.Replayed, "the last ended run is a replay, not joined again")
}
