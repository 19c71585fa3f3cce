package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// scripted is a family whose Decide and Resolve are the test's functions;
// it counts the calls it sends and remembers the journal bound to it.
type scripted struct {
	decide  func(run *workflow.Run, send func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision
	resolve func(run *workflow.Run, call store.Record) workflow.Verdict
	// confirm answers ConfirmReplay (nil: the cluster agrees); confirmed
	// counts the questions.
	confirm   func(run *workflow.Run) (*workflow.Contradiction, error)
	confirmed int
	sent      int
	bound     workflow.JournalReader
}

func (f *scripted) Decide(_ context.Context, run *workflow.Run) (workflow.Decision, error) {
	return f.decide(run, func(a workflow.Answer) func(context.Context) workflow.Answer {
		return func(context.Context) workflow.Answer { f.sent++; return a }
	}), nil
}

func (f *scripted) Resolve(_ context.Context, run *workflow.Run, call store.Record) (workflow.Verdict, error) {
	return f.resolve(run, call), nil
}

func (f *scripted) ConfirmReplay(_ context.Context, run *workflow.Run) (*workflow.Contradiction, error) {
	f.confirmed++
	if f.confirm == nil {
		return nil, nil
	}
	return f.confirm(run)
}

func (f *scripted) BindJournal(j workflow.JournalReader) { f.bound = j }

func toy(mutation string) store.PrepareParams {
	return store.PrepareParams{Kind: "ToyClaim", MutationID: mutation, RequestID: "req-" + mutation,
		CommandDigest: "sha256:" + fmt.Sprintf("%064d", 1), Namespace: "ns", Name: "name"}
}

func kinds(records []store.Record) []store.RecordKind {
	out := make([]store.RecordKind, len(records))
	for i, r := range records {
		out[i] = r.Kind
	}
	return out
}

func noResolve(*workflow.Run, store.Record) workflow.Verdict {
	return workflow.Verdict{Kind: workflow.Undetermined}
}

// Operate drives a family on any journal: each branch below ends where the
// journal says, with the records it says, in the transactions it says.
func TestOperateWithTheInMemoryJournal(t *testing.T) {
	t.Parallel()
	final := func(a workflow.Answer) func(*workflow.Run, func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
		return func(_ *workflow.Run, send func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
			return workflow.Decision{Call: &workflow.Call{Step: "write", Target: store.SecretTarget("", "x"), Final: true,
				Summary: store.DetailOf(map[string]any{"wrote": "x"}), Send: send(a)}}
		}
	}
	cases := []struct {
		name         string
		family       *scripted
		outcome      workflow.Outcome
		err          error
		state        store.State
		records      []store.RecordKind
		sent         int
		transactions int64
	}{
		{
			name: "complete",
			family: &scripted{decide: func(*workflow.Run, func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
				return workflow.Decision{Complete: &workflow.Completion{Outcome: workflow.OutcomeExisting}}
			}, resolve: noResolve},
			outcome: workflow.OutcomeExisting, state: store.StateCompleted,
			records:      []store.RecordKind{store.RecordPreparation, store.RecordCompletion},
			transactions: 2,
		},
		{
			name: "refuse",
			family: &scripted{decide: func(*workflow.Run, func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
				return workflow.Decision{Refuse: &workflow.Refusal{Reason: "key-active"}}
			}, resolve: noResolve},
			outcome: workflow.OutcomeRefused, err: &workflow.Refused{Reason: "key-active"}, state: store.StateRefused,
			records:      []store.RecordKind{store.RecordPreparation, store.RecordRefusal},
			transactions: 2,
		},
		{
			name:    "a call applied",
			family:  &scripted{decide: final(workflow.Answer{Status: workflow.Applied, UID: "u1"}), resolve: noResolve},
			outcome: workflow.OutcomeCompleted, state: store.StateCompleted,
			records: []store.RecordKind{store.RecordPreparation, store.RecordAuthorityCall, store.RecordAuthorityResult,
				store.RecordCompletion},
			sent: 1, transactions: 3,
		},
		{
			name: "a lost answer resolved ours",
			family: &scripted{decide: final(workflow.Answer{Status: workflow.Unknown, Reason: "lost"}),
				resolve: func(*workflow.Run, store.Record) workflow.Verdict {
					return workflow.Verdict{Kind: workflow.Ours, UID: "u1", Summary: store.DetailOf(map[string]any{"wrote": "x"})}
				}},
			outcome: workflow.OutcomeConverged, state: store.StateCompleted,
			records: []store.RecordKind{store.RecordPreparation, store.RecordAuthorityCall, store.RecordAuthorityResult,
				store.RecordResolution, store.RecordCompletion},
			sent: 1, transactions: 4,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			j := workflowtest.NewJournal()
			res, err := workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: c.family}, nil)
			if c.err != nil {
				require.Equal(t, c.err, err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, c.outcome, res.Outcome)
			require.Equal(t, c.sent, c.family.sent)
			require.Equal(t, c.transactions, res.Transactions)
			require.Same(t, j, c.family.bound, "the journal is bound to a JournalBound family")
			op, records, err := j.Snapshot(t.Context(), "", "m")
			require.NoError(t, err)
			require.Equal(t, c.state, op.State)
			require.Equal(t, c.records, kinds(records))
			require.Equal(t, op, res.Run.Op, "the run's view is the journal's")
			require.Equal(t, c.records, kinds(res.Run.Records))

			again, err := workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: c.family}, nil)
			require.Equal(t, c.err, err)
			require.True(t, again.Replayed, "a terminal operation is replayed")
			require.EqualValues(t, 1, again.Transactions, "a replay commits only its prepare")
			require.Equal(t, c.sent, c.family.sent, "a replay sends nothing")
			wantConfirmed := 0
			if c.state == store.StateCompleted {
				wantConfirmed = 1
			}
			require.Equal(t, wantConfirmed, c.family.confirmed, "a completed operation's replay is confirmed by the family, a refused one's is not")
		})
	}
}

// forgeCompleted journals, as someone who can write the journal could, a
// completed operation for prepare that did nothing: its preparation, then
// its completion.
func forgeCompleted(t *testing.T, j workflow.Store, prepare store.PrepareParams) {
	t.Helper()
	op, created, err := j.Prepare(t.Context(), prepare)
	require.NoError(t, err)
	require.True(t, created)
	_, err = j.Transition(t.Context(), store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCompleted,
		Revision: op.Revision, Outcome: string(workflow.OutcomeCompleted),
		Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete", Status: store.Status(workflow.OutcomeCompleted)}}})
	require.NoError(t, err)
}

// A completed operation is reported existing only with the cluster's
// agreement (Family.ConfirmReplay): a contradiction refuses with its
// replay- reason, a failed read is unavailable, and neither decides,
// sends or appends anything, nor reports the journaled ending.
func TestOperateBelievesAReplayOnlyWithTheCluster(t *testing.T) {
	t.Parallel()
	never := func(*workflow.Run, func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
		panic("a replay is never decided")
	}
	cases := []struct {
		name    string
		confirm func(*workflow.Run) (*workflow.Contradiction, error)
		outcome workflow.Outcome
		err     error
	}{
		{name: "agrees: existing", outcome: workflow.OutcomeExisting},
		{
			name: "contradicts: refused with the family's reason",
			confirm: func(*workflow.Run) (*workflow.Contradiction, error) {
				return &workflow.Contradiction{Reason: "replay-receipt-missing", Detail: "no receipt"}, nil
			},
			outcome: workflow.OutcomeRefused, err: &workflow.Refused{Reason: "replay-receipt-missing", Detail: "no receipt"},
		},
		{
			name: "contradicts without the prefix: the engine adds it",
			confirm: func(*workflow.Run) (*workflow.Contradiction, error) {
				return &workflow.Contradiction{Reason: "uid-changed", Detail: "another UID"}, nil
			},
			outcome: workflow.OutcomeRefused, err: &workflow.Refused{Reason: "replay-uid-changed", Detail: "another UID"},
		},
		{
			name: "the read failed: unavailable, never existing",
			confirm: func(*workflow.Run) (*workflow.Contradiction, error) {
				return nil, errors.New("connection reset")
			},
			err: &workflow.Unavailable{Dependency: "kubernetes", Err: errors.New("connection reset")},
		},
		{
			name: "the family's own unavailable is kept",
			confirm: func(*workflow.Run) (*workflow.Contradiction, error) {
				return nil, &workflow.Unavailable{Dependency: "postgresql", Err: errors.New("gone")}
			},
			err: &workflow.Unavailable{Dependency: "postgresql", Err: errors.New("gone")},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			j := workflowtest.NewJournal()
			forgeCompleted(t, j, toy("m"))
			_, before, err := j.Snapshot(t.Context(), "", "m")
			require.NoError(t, err)
			f := &scripted{decide: never, resolve: noResolve, confirm: c.confirm}

			res, err := workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: f}, nil)
			require.Equal(t, c.err, err)
			require.Equal(t, c.outcome, res.Outcome)
			require.True(t, res.Replayed)
			require.Equal(t, 1, f.confirmed)
			require.Zero(t, f.sent)
			if c.err == nil {
				require.NotNil(t, res.Run)
			} else {
				require.Nil(t, res.Run, "a journaled ending the cluster does not confirm is not reported")
			}
			require.EqualValues(t, 1, res.Transactions, "only the prepare that found the operation")
			_, after, err := j.Snapshot(t.Context(), "", "m")
			require.NoError(t, err)
			require.Equal(t, before, after, "nothing is appended to a final operation")

			// keyledger plan asks the same question, read-only.
			deps := workflow.Deps{OpenStore: func(context.Context) (workflow.Store, error) { return j, nil }}
			txs := j.Transactions()
			plan, err := workflow.DryRun(t.Context(), deps, workflow.Plan{Prepare: toy("m"), Family: f})
			require.Equal(t, txs, j.Transactions(), "a plan writes nothing")
			require.Equal(t, 2, f.confirmed)
			var unavailable *workflow.Unavailable
			if errors.As(c.err, &unavailable) {
				require.Equal(t, c.err, err)
				return
			}
			require.NoError(t, err)
			require.True(t, plan.Replay)
			require.Equal(t, c.outcome, plan.Outcome)
			var refused *workflow.Refused
			if errors.As(c.err, &refused) {
				require.Equal(t, refused.Reason, plan.Reason)
				require.True(t, plan.Summary.IsZero(), "the journaled ending is not shown")
			}
		})
	}
}

// An operation found in calling (a crash after its call was recorded) is
// never sent again: the call is resolved from the durable facts.
func TestOperateResumesCallingByResolving(t *testing.T) {
	t.Parallel()
	for _, final := range []bool{false, true} {
		t.Run(fmt.Sprintf("final=%v", final), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			j := workflowtest.NewJournal()
			op, _, err := j.Prepare(ctx, toy("m"))
			require.NoError(t, err)
			_, err = j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling,
				Records: []store.Record{{Kind: store.RecordAuthorityCall, Step: "write", Target: store.SecretTarget("", "x"), Attempt: 1, UID: "u0",
					Batch: 1, Final: final}}})
			require.NoError(t, err)

			var resolved []store.Record
			decided := 0
			f := &scripted{
				decide: func(run *workflow.Run, send func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
					decided++
					if _, ok := run.Settled("write", store.SecretTarget("", "x")); ok {
						return workflow.Decision{Complete: &workflow.Completion{Outcome: workflow.OutcomeConverged}}
					}
					return workflow.Decision{Call: &workflow.Call{Step: "write", Target: store.SecretTarget("", "x"), Send: send(workflow.Answer{Status: workflow.Applied})}}
				},
				resolve: func(_ *workflow.Run, call store.Record) workflow.Verdict {
					resolved = append(resolved, call)
					return workflow.Verdict{Kind: workflow.Ours, UID: "u1"}
				},
			}
			res, err := workflow.Operate(ctx, j, workflow.Plan{Prepare: toy("m"), Family: f}, nil)
			require.NoError(t, err)
			require.False(t, res.Replayed)
			require.Equal(t, workflow.OutcomeConverged, res.Outcome)
			require.Zero(t, f.sent, "the recorded call is not sent again")
			require.Len(t, resolved, 1)
			require.Equal(t, "u0", resolved[0].UID)
			if final {
				require.Zero(t, decided, "a final call settled ours completes the operation")
			} else {
				require.Equal(t, 1, decided, "after a call settled ours the family decides again")
			}
			_, records, err := j.Snapshot(ctx, "", "m")
			require.NoError(t, err)
			require.Equal(t, []store.RecordKind{store.RecordPreparation, store.RecordAuthorityCall, store.RecordAuthorityResult,
				store.RecordResolution, store.RecordCompletion}, kinds(records))
			require.Equal(t, store.Status("lost"), records[2].Status, "the missing answer is journaled as lost")
		})
	}
}

// A mutation ID journaled for another command is refused before anything
// is driven.
func TestOperateRefusesAReusedMutationID(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	j := workflowtest.NewJournal()
	_, _, err := j.Prepare(ctx, toy("m"))
	require.NoError(t, err)
	other := toy("m")
	other.CommandDigest = "sha256:" + fmt.Sprintf("%064d", 2)
	f := &scripted{decide: func(*workflow.Run, func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
		t.Fatal("a reused mutation ID is never decided")
		return workflow.Decision{}
	}, resolve: noResolve}
	_, err = workflow.Operate(ctx, j, workflow.Plan{Prepare: other, Family: f}, nil)
	var refused *workflow.Refused
	require.ErrorAs(t, err, &refused)
	require.Equal(t, "mutation-id-reused", refused.Reason)
}

// A dry run reads the journal through the same seam and writes nothing to
// it: a fresh command is planned, a finished one is a replay.
func TestDryRunOnlyReadsTheJournal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	j := workflowtest.NewJournal()
	f := &scripted{decide: func(run *workflow.Run, send func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
		return workflow.Decision{Call: &workflow.Call{Step: "write", Target: store.SecretTarget("", "x"), Final: true, Send: send(workflow.Answer{Status: workflow.Applied})}}
	}, resolve: noResolve}
	deps := workflow.Deps{OpenStore: func(context.Context) (workflow.Store, error) { return j, nil }}
	plan, err := workflow.DryRun(ctx, deps, workflow.Plan{Prepare: toy("m"), Family: f})
	require.NoError(t, err)
	require.Equal(t, "new", plan.Journal)
	require.Equal(t, workflow.OutcomeCompleted, plan.Outcome)
	require.Len(t, plan.Calls(), 1)
	require.Zero(t, f.sent, "a dry run sends nothing")
	require.Zero(t, j.Transactions(), "a dry run writes nothing")
	require.Same(t, j, f.bound, "the journal is bound for the dry run too")

	done := workflowtest.NewJournal()
	_, err = workflow.Operate(ctx, done, workflow.Plan{Prepare: toy("m"), Family: f}, nil)
	require.NoError(t, err)
	before := done.Transactions()
	deps.OpenStore = func(context.Context) (workflow.Store, error) { return done, nil }
	plan, err = workflow.DryRun(ctx, deps, workflow.Plan{Prepare: toy("m"), Family: f})
	require.NoError(t, err)
	require.True(t, plan.Replay)
	require.Equal(t, workflow.OutcomeExisting, plan.Outcome)
	require.Equal(t, before, done.Transactions())
}

// An operation completed by another hand while this run drives it (found
// on a reload after a lost compare-and-set) is believed only with the
// cluster's agreement too: a forged completion slipped in mid-run refuses,
// with nothing sent; a genuine concurrent one ends the run existing (this
// run wrote nothing and ended nothing).
func TestOperateConfirmsACompletionFoundMidRun(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		confirm func(*workflow.Run) (*workflow.Contradiction, error)
		outcome workflow.Outcome
		err     error
	}{
		{name: "the cluster agrees", outcome: workflow.OutcomeExisting},
		{
			name: "the cluster contradicts",
			confirm: func(*workflow.Run) (*workflow.Contradiction, error) {
				return &workflow.Contradiction{Reason: "replay-claim-missing", Detail: "not claimed"}, nil
			},
			outcome: workflow.OutcomeRefused, err: &workflow.Refused{Reason: "replay-claim-missing", Detail: "not claimed"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			j := workflowtest.NewJournal()
			f := &scripted{resolve: noResolve, confirm: c.confirm}
			f.decide = func(run *workflow.Run, send func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
				// Another hand ends the operation between this decision's
				// read and its commit.
				_, err := j.Transition(t.Context(), store.TransitionParams{OperationID: run.Op.ID, From: run.Op.State, To: store.StateCompleted,
					Revision: run.Op.Revision, Outcome: string(workflow.OutcomeCompleted),
					Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete", Status: store.Status(workflow.OutcomeCompleted)}}})
				require.NoError(t, err)
				return workflow.Decision{Call: &workflow.Call{Step: "write", Target: store.SecretTarget("", "x"), Final: true, Send: send(workflow.Answer{Status: workflow.Applied})}}
			}
			res, err := workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: f}, nil)
			require.Equal(t, c.err, err)
			require.Equal(t, c.outcome, res.Outcome)
			require.Equal(t, 1, f.confirmed, "the completion this run did not make is confirmed")
			require.Zero(t, f.sent, "the call lost its compare-and-set: never sent")
			_, records, err := j.Snapshot(t.Context(), "", "m")
			require.NoError(t, err)
			require.Equal(t, []store.RecordKind{store.RecordPreparation, store.RecordCompletion}, kinds(records))
		})
	}
}

// Of the runs of one command, the one whose final call was answered
// applied says completed, even when another run, finding the call in
// flight, resolved it and journaled the ending (converged) first; a run
// that wrote nothing and ended nothing says existing. Before, the writer
// said converged, as the run that resolved its call did.
func TestOperateTheWriterSaysCompleted(t *testing.T) {
	t.Parallel()
	j := workflowtest.NewJournal()
	other := &scripted{resolve: func(*workflow.Run, store.Record) workflow.Verdict { return workflow.Verdict{Kind: workflow.Ours} }}
	var otherRes *workflow.Result
	f := &scripted{resolve: func(*workflow.Run, store.Record) workflow.Verdict { return workflow.Verdict{Kind: workflow.Ours} }}
	f.decide = func(_ *workflow.Run, send func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
		applied := send(workflow.Answer{Status: workflow.Applied})
		return workflow.Decision{Call: &workflow.Call{Step: "write", Target: store.SecretTarget("", "x"), Final: true,
			Send: func(ctx context.Context) workflow.Answer {
				// While the call is in flight, another run of the command
				// finds the operation calling, resolves the call from the
				// cluster (ours) and ends the operation.
				var err error
				otherRes, err = workflow.Operate(ctx, j, workflow.Plan{Prepare: toy("m"), Family: other}, nil)
				require.NoError(t, err)
				return applied(ctx)
			}}}
	}
	res, err := workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: f}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, f.sent)
	require.Zero(t, other.sent)
	require.Equal(t, workflow.OutcomeCompleted, res.Outcome, "this run's call made the change")
	require.Equal(t, workflow.OutcomeConverged, otherRes.Outcome, "the other run ended the operation from a re-read")
	op, _, err := j.Snapshot(t.Context(), "", "m")
	require.NoError(t, err)
	require.Equal(t, string(workflow.OutcomeConverged), op.Outcome, "the journal holds the ending run's word")

	// A third run finds it ended: a replay, existing.
	res, err = workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: other}, nil)
	require.NoError(t, err)
	require.Equal(t, workflow.OutcomeExisting, res.Outcome)
}

// A run that wrote part of an operation (its first call) while another run
// made the final call and ended it says converged, not completed: of the
// runs of one command, only the one whose final call was applied says
// completed.
func TestOperateAPartialWriterSaysConverged(t *testing.T) {
	t.Parallel()
	j := workflowtest.NewJournal()
	ours := func(*workflow.Run, store.Record) workflow.Verdict { return workflow.Verdict{Kind: workflow.Ours} }
	steps := func(onSnap func(ctx context.Context)) func(*workflow.Run, func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
		return func(run *workflow.Run, send func(workflow.Answer) func(context.Context) workflow.Answer) workflow.Decision {
			applied := send(workflow.Answer{Status: workflow.Applied})
			switch {
			case func() bool { _, ok := run.Settled("live", store.SecretTarget("", "x")); return ok }():
				return workflow.Decision{Complete: &workflow.Completion{Outcome: workflow.OutcomeCompleted}}
			case func() bool { _, ok := run.Settled("snap", store.SecretTarget("", "x")); return ok }():
				return workflow.Decision{Call: &workflow.Call{Step: "live", Target: store.SecretTarget("", "x"), Final: true, Send: applied}}
			default:
				return workflow.Decision{Call: &workflow.Call{Step: "snap", Target: store.SecretTarget("", "x"),
					Send: func(ctx context.Context) workflow.Answer { onSnap(ctx); return applied(ctx) }}}
			}
		}
	}
	other := &scripted{resolve: ours}
	other.decide = steps(func(context.Context) { t.Fatal("the other run never sends the snapshot") })
	var otherRes *workflow.Result
	f := &scripted{resolve: ours}
	f.decide = steps(func(ctx context.Context) {
		// While this run's snapshot call is in flight, another run finds
		// it calling, resolves it (ours), sends the final call and ends
		// the operation.
		var err error
		otherRes, err = workflow.Operate(ctx, j, workflow.Plan{Prepare: toy("m"), Family: other}, nil)
		require.NoError(t, err)
	})
	res, err := workflow.Operate(t.Context(), j, workflow.Plan{Prepare: toy("m"), Family: f}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, f.sent)
	require.Equal(t, 1, other.sent)
	require.Equal(t, workflow.OutcomeCompleted, otherRes.Outcome, "the other run's final call made the change")
	require.Equal(t, workflow.OutcomeConverged, res.Outcome, "this run wrote part of it")
}
