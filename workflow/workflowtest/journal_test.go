package workflowtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

func prep(mutation string, n int) store.PrepareParams {
	return store.PrepareParams{Kind: "ToyClaim", MutationID: mutation, RequestID: "req-" + mutation,
		CommandDigest: "sha256:" + fmt.Sprintf("%064d", n), Namespace: "ns", Name: "name"}
}

func sqlState(err error) string {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		return s.SQLState()
	}
	return ""
}

func TestPrepareResumesOrRefusesAnotherCommand(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	j := NewJournal()
	op, created, err := j.Prepare(ctx, prep("m1", 1))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, store.StatePrepared, op.State)
	again, created, err := j.Prepare(ctx, prep("m1", 1))
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, op.ID, again.ID)
	_, _, err = j.Prepare(ctx, prep("m1", 2))
	require.ErrorIs(t, err, store.ErrDigestMismatch)
	other := prep("m1", 1)
	other.Kind = "OtherClaim"
	_, _, err = j.Prepare(ctx, other)
	require.ErrorIs(t, err, store.ErrDigestMismatch)
	bad := prep("m2", 1)
	bad.Kind = "lower"
	_, _, err = j.Prepare(ctx, bad)
	require.Equal(t, "23514", sqlState(err))
	require.EqualError(t, err, "inserting operation: server error 23514 (ERROR) on operations_kind_check")
	require.EqualValues(t, 2, j.Transactions(), "a prepare that found its operation commits too; refusals do not")
	_, records, err := j.Snapshot(ctx, "", "m1")
	require.NoError(t, err)
	require.Len(t, records, 1)
	require.Equal(t, store.RecordPreparation, records[0].Kind)
}

// Every move is a compare-and-set on state and revision, only along the
// journal's edges, and a refused move changes nothing.
func TestTransitionIsACompareAndSet(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	j := NewJournal()
	op, _, err := j.Prepare(ctx, prep("m", 1))
	require.NoError(t, err)
	call := store.Record{Kind: store.RecordAuthorityCall, Step: "replace-keyring", Attempt: 1, Batch: 1, Final: true}
	moved, err := j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling,
		Revision: 0, Records: []store.Record{call}})
	require.NoError(t, err)
	require.EqualValues(t, 1, moved.Revision)

	refusals := []struct {
		name  string
		p     store.TransitionParams
		is    error
		state string
	}{
		{"stale revision", store.TransitionParams{From: store.StateCalling, To: store.StateAnswered, Revision: 0}, store.ErrStateMoved, ""},
		{"wrong from", store.TransitionParams{From: store.StatePrepared, To: store.StateCalling, Revision: 1}, store.ErrStateMoved, ""},
		{"no such edge", store.TransitionParams{From: store.StateCalling, To: store.StatePrepared, Revision: 1}, nil, "23514"},
		{"terminal without outcome", store.TransitionParams{From: store.StateCalling, To: store.StateCompleted, Revision: 1,
			Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete"}}}, nil, ""},
		{"terminal without its ending", store.TransitionParams{From: store.StateCalling, To: store.StateCompleted, Revision: 1,
			Outcome: "completed"}, nil, "23000"},
		{"ending without its move", store.TransitionParams{From: store.StateCalling, To: store.StateCalling, Revision: 1,
			Records: []store.Record{{Kind: store.RecordRefusal, Step: "refuse"}}}, nil, "23000"},
		{"outcome on a non-terminal move", store.TransitionParams{From: store.StateCalling, To: store.StateAnswered, Revision: 1,
			Outcome: "completed"}, nil, "23514"},
		{"same attempt twice", store.TransitionParams{From: store.StateCalling, To: store.StateCalling, Revision: 1,
			Records: []store.Record{call}}, nil, "23505"},
		{"negative batch", store.TransitionParams{From: store.StateCalling, To: store.StateCalling, Revision: 1,
			Records: []store.Record{{Kind: store.RecordAuthorityCall, Step: "x", Attempt: 1, Batch: -1}}}, nil, "23514"},
		{"final on a non-call", store.TransitionParams{From: store.StateCalling, To: store.StateCalling, Revision: 1,
			Records: []store.Record{{Kind: store.RecordObservation, Step: "x", Final: true}}}, nil, "23514"},
		{"call without attempt", store.TransitionParams{From: store.StateCalling, To: store.StateCalling, Revision: 1,
			Records: []store.Record{{Kind: store.RecordAuthorityCall, Step: "x"}}}, nil, "23514"},
		{"detail with NUL", store.TransitionParams{From: store.StateCalling, To: store.StateCalling, Revision: 1,
			Records: []store.Record{{Kind: store.RecordObservation, Step: "x", Detail: store.DetailOf(map[string]any{"a": "\x00"})}}}, nil, "22P05"},
		{"detail too large", store.TransitionParams{From: store.StateCalling, To: store.StateCalling, Revision: 1,
			Records: []store.Record{{Kind: store.RecordObservation, Step: "x", Detail: store.DetailOf(map[string]any{"a": strings.Repeat("x", 16384)})}}}, nil, "23514"},
	}
	for _, r := range refusals {
		r.p.OperationID = op.ID
		_, err := j.Transition(ctx, r.p)
		require.Error(t, err, r.name)
		if r.is != nil {
			require.ErrorIs(t, err, r.is, r.name)
		}
		require.Equal(t, r.state, sqlState(err), "%s: %v", r.name, err)
	}
	now, records, err := j.Snapshot(ctx, "", "m")
	require.NoError(t, err)
	require.Equal(t, store.StateCalling, now.State, "refused moves changed nothing")
	require.EqualValues(t, 1, now.Revision)
	require.Len(t, records, 2)
	require.Equal(t, 1, records[1].Batch)
	require.True(t, records[1].Final)

	noted, err := j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StateCalling, To: store.StateCalling, Revision: 1,
		Records: []store.Record{{Kind: store.RecordObservation, Step: "read"}}})
	require.NoError(t, err)
	require.EqualValues(t, 2, noted.Revision, "an append without a move bumps the revision")
	done, err := j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StateCalling, To: store.StateCompleted, Revision: 2,
		Outcome: "completed", Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete", Status: "completed"}}})
	require.NoError(t, err)
	require.Equal(t, "completed", done.Outcome)
	require.NotNil(t, done.FinalizedAt)
	_, err = j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StateCompleted, To: store.StateCompleted, Revision: 3,
		Outcome: "completed", Records: []store.Record{{Kind: store.RecordObservation, Step: "read"}}})
	require.Equal(t, "42501", sqlState(err), "nothing is appended to a finished operation: %v", err)
	require.EqualValues(t, 4, j.Transactions())
}

// What goes in and what comes out are copies, and numbers come back as
// float64, as from jsonb.
func TestSnapshotCopiesAndDecodesAsJSON(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	j := NewJournal()
	op, _, err := j.Prepare(ctx, prep("m", 1))
	require.NoError(t, err)
	detail := map[string]any{"count": 3, "names": []string{"a"}}
	_, err = j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StatePrepared,
		Records: []store.Record{{Kind: store.RecordObservation, Step: "read", Detail: store.DetailOf(detail)}}})
	require.NoError(t, err)
	detail["count"] = 4
	got, records, err := j.Snapshot(ctx, "", "m")
	require.NoError(t, err)
	require.JSONEq(t, `{"count": 3, "names": ["a"]}`, records[1].Detail.String())
	got.State = store.StateRefused
	again, _, err := j.Snapshot(ctx, "", "m")
	require.NoError(t, err)
	require.Equal(t, store.StatePrepared, again.State)
	require.Equal(t, "{}", records[0].Detail.String(), "no detail reads back as an empty object")
	require.Less(t, records[0].ID, records[1].ID)
}

func TestPrepareRunNumbersAndResumesRuns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	j := NewJournal()
	p := prep("plan", 1)
	first, created, err := j.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "plan:run-1", first.MutationID)
	resumed, created, err := j.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.False(t, created, "an unfinished run is resumed")
	require.Equal(t, first.ID, resumed.ID)
	require.Equal(t, first.Revision+1, resumed.Revision, "a resume is journaled: the revision moves on")
	_, err = j.Transition(ctx, store.TransitionParams{OperationID: first.ID, From: store.StatePrepared, To: store.StateCompleted,
		Revision: resumed.Revision, Outcome: "completed", Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete"}}})
	require.NoError(t, err)
	second, created, err := j.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "plan:run-2", second.MutationID)
	_, records, err := j.Snapshot(ctx, "", "plan:run-2")
	require.NoError(t, err)
	require.JSONEq(t, `{"command": "plan", "run": 2}`, records[0].Detail.String())
	other := prep("plan", 1)
	other.Name = "another-owner"
	_, _, err = j.PrepareRun(ctx, other)
	require.ErrorIs(t, err, store.ErrDigestMismatch, "two targets never share an identity")
	// A changed command under the same identity is its next version: the
	// unfinished run 2 is closed (plan-superseded) and run 3 starts.
	third, created, err := j.PrepareRun(ctx, prep("plan", 2))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "plan:run-3", third.MutationID)
	closed, _, err := j.Snapshot(ctx, "", "plan:run-2")
	require.NoError(t, err)
	require.Equal(t, store.StateRefused, closed.State)
	require.Equal(t, store.ReasonPlanSuperseded, closed.Reason)
	_, records, err = j.Snapshot(ctx, "", "plan:run-3")
	require.NoError(t, err)
	lineage, err := store.DecodeDetail[store.RunLineage](records[0].Detail)
	require.NoError(t, err)
	require.Equal(t, prep("plan", 1).CommandDigest, lineage.Supersedes)
	runs, err := j.Runs(ctx, "plan")
	require.NoError(t, err)
	require.Len(t, runs, 3)
}

// The run bound closes a run resumed too often (or too old) and starts the
// next one in its place.
func TestPrepareRunBound(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	j := NewJournal()
	p := prep("plan", 1)
	p.Bound = store.RunBound{MaxResumes: 2}
	first, _, err := j.PrepareRun(ctx, p)
	require.NoError(t, err)
	for range 2 {
		op, created, err := j.PrepareRun(ctx, p)
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, first.ID, op.ID)
	}
	next, created, err := j.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.True(t, created, "the third resume closes run 1")
	require.Equal(t, "plan:run-2", next.MutationID)
	closed, records, err := j.Snapshot(ctx, "", "plan:run-1")
	require.NoError(t, err)
	require.Equal(t, store.StateRefused, closed.State)
	require.Equal(t, store.ReasonRunResumeLimit, closed.Reason)
	require.Equal(t, store.RecordRefusal, records[len(records)-1].Kind)
	_, records, err = j.Snapshot(ctx, "", "plan:run-2")
	require.NoError(t, err)
	lineage, err := store.DecodeDetail[store.RunLineage](records[0].Detail)
	require.NoError(t, err)
	require.Equal(t, "plan:run-1", lineage.Replaces)

	aged := prep("aged", 1)
	aged.Bound = store.RunBound{MaxAge: time.Nanosecond}
	_, _, err = j.PrepareRun(ctx, aged)
	require.NoError(t, err)
	op, created, err := j.PrepareRun(ctx, aged)
	require.NoError(t, err)
	require.True(t, created, "a run older than the bound is closed")
	require.Equal(t, "aged:run-2", op.MutationID)
	closed, _, err = j.Snapshot(ctx, "", "aged:run-1")
	require.NoError(t, err)
	require.Equal(t, store.ReasonRunAgeLimit, closed.Reason)
}

// The newest run is the highest run number; an operation under the bare
// mutation ID counts only while no run exists.
func TestPrepareRunIgnoresBareIDOnceRunsExist(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	j := NewJournal()
	p := prep("plan", 1)
	first, _, err := j.PrepareRun(ctx, p)
	require.NoError(t, err)
	_, err = j.Transition(ctx, store.TransitionParams{OperationID: first.ID, From: store.StatePrepared, To: store.StateCompleted,
		Revision: first.Revision, Outcome: "completed", Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete"}}})
	require.NoError(t, err)
	bare, _, err := j.Prepare(ctx, p) // the bare mutation ID, inserted after run 1
	require.NoError(t, err)
	_, err = j.Transition(ctx, store.TransitionParams{OperationID: bare.ID, From: store.StatePrepared, To: store.StateCompleted,
		Revision: bare.Revision, Outcome: "completed", Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete"}}})
	require.NoError(t, err)
	next, created, err := j.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "plan:run-2", next.MutationID)
}

// StepRecords returns, of the listed targets only, the step's records of
// the operations whose call on that target is bound to the UID.
func TestStepRecordsKeepsOperationsBoundToTheCallUID(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	j := NewJournal()
	for i, uid := range []string{"uid-a", "uid-b", "uid-a"} {
		op, _, err := j.Prepare(ctx, prep(fmt.Sprintf("m%d", i), i))
		require.NoError(t, err)
		_, err = j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling,
			Records: []store.Record{
				{Kind: store.RecordObservation, Step: "snapshot", Target: store.SecretTarget("ns", "s1")},
				{Kind: store.RecordAuthorityCall, Step: "snapshot", Target: store.SecretTarget("ns", "s1"), Attempt: 1, UID: uid, Detail: store.DetailOf(map[string]any{"n": i})},
				{Kind: store.RecordAuthorityCall, Step: "snapshot", Target: store.SecretTarget("ns", "s2"), Attempt: 1, UID: uid},
				{Kind: store.RecordAuthorityCall, Step: "other", Target: store.SecretTarget("ns", "s1"), Attempt: 1, UID: uid},
			}})
		require.NoError(t, err)
	}
	one := []string{"secret/s1"}
	groups, err := j.StepRecords(ctx, store.StepRecordsParams{Namespace: "ns", Name: "name", Step: "snapshot", CallUID: "uid-a", Targets: one})
	require.NoError(t, err)
	require.Len(t, groups, 2)
	for i, g := range groups {
		require.Len(t, g, 2, "the records on secret/s1 only")
		require.Equal(t, store.SecretTarget("ns", "s1"), g[1].Target, "in the operation's namespace")
		require.JSONEq(t, fmt.Sprintf(`{"n": %d}`, 2*i), g[1].Detail.String())
	}
	groups, err = j.StepRecords(ctx, store.StepRecordsParams{Namespace: "ns", Name: "name", Step: "snapshot", CallUID: "uid-a", Targets: []string{"secret/s1", "secret/s2"}})
	require.NoError(t, err)
	require.Len(t, groups, 2)
	require.Len(t, groups[0], 3)
	groups, err = j.StepRecords(ctx, store.StepRecordsParams{Namespace: "ns", Name: "name", Step: "snapshot", CallUID: "uid-c", Targets: one})
	require.NoError(t, err)
	require.Nil(t, groups)
	groups, err = j.StepRecords(ctx, store.StepRecordsParams{Namespace: "ns", Name: "name", Step: "snapshot", CallUID: "uid-a", Targets: []string{"secret/s3"}})
	require.NoError(t, err)
	require.Nil(t, groups, "no record on an unlisted target")
	groups, err = j.StepRecords(ctx, store.StepRecordsParams{Namespace: "ns", Name: "name", Step: "snapshot", CallUID: "uid-a"})
	require.NoError(t, err)
	require.Nil(t, groups, "no target, nothing read")
	_, err = j.StepRecords(ctx, store.StepRecordsParams{Namespace: "ns", Name: "name", Step: "snapshot", CallUID: "uid-a", Targets: make([]string, store.MaxStepTargets+1)})
	require.ErrorContains(t, err, "at most")
}

// Of two movers holding the same view, exactly one wins.
func TestTransitionConcurrentMoversOneWins(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	j := NewJournal()
	op, _, err := j.Prepare(ctx, prep("m", 1))
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling,
				Records: []store.Record{{Kind: store.RecordAuthorityCall, Step: "s", Attempt: 1}}})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		} else {
			require.ErrorIs(t, err, store.ErrStateMoved)
		}
	}
	require.Equal(t, 1, won)
}

func TestClosedJournalIsUnreachable(t *testing.T) {
	t.Parallel()
	j := NewJournal()
	j.Close()
	_, _, err := j.Prepare(t.Context(), prep("m", 1))
	var unreachable *store.UnreachableError
	require.ErrorAs(t, err, &unreachable)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = NewJournal().Snapshot(ctx, "", "m")
	require.ErrorIs(t, err, context.Canceled)
}

func TestNumericTextPrintsAsPostgreSQL(t *testing.T) {
	t.Parallel()
	for lit, want := range map[string]string{
		"3": "3", "-3": "-3", "0": "0", "-0": "0", "1.5": "1.5", "1e+21": "1000000000000000000000",
		"1.5e-07": "0.00000015", "1.25e+2": "125", "1.234e+1": "12.34", "-2e-7": "-0.0000002",
	} {
		require.Equal(t, want, numericText(lit), lit)
	}
	n, err := jsonbTextSize([]byte(`{"a":1,"bb":[true,null,"x\n"]}`))
	require.NoError(t, err)
	require.Equal(t, len(`{"a": 1, "bb": [true, null, "x\n"]}`), n)
}

// Ending spells every way a run ends once.
func TestEnding(t *testing.T) {
	t.Parallel()
	done := &workflow.Result{Outcome: workflow.OutcomeCompleted}
	require.Equal(t, "completed", Ending(done, nil))
	require.Equal(t, "replayed existing", Ending(&workflow.Result{Outcome: workflow.OutcomeExisting, Replayed: true}, nil))
	require.Equal(t, "refused/key-active", Ending(&workflow.Result{Outcome: workflow.OutcomeRefused}, fmt.Errorf("run: %w", &workflow.Refused{Reason: "key-active"})))
	require.Equal(t, "uncertain/interrupted", Ending(nil, &workflow.Uncertain{Reason: "interrupted"}))
	require.Equal(t, "unavailable/kubernetes", Ending(nil, &workflow.Unavailable{Dependency: "kubernetes"}))
	require.Equal(t, "error: boom", Ending(nil, errors.New("boom")))
	require.Equal(t, "error: no result", Ending(nil, nil))
	require.Equal(t, "refused/x (result says completed)", Ending(done, &workflow.Refused{Reason: "x"}), "a Result that disagrees shows")
}

// Mutation IDs are unique within a namespace, as the journal's key is
// (migration 12): one ID in two namespaces is two operations, each
// namespace's runs are numbered and found on their own, and asking
// without a namespace for an ID two namespaces hold is ambiguous.
func TestMutationIDsAreScopedByNamespace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	j := NewJournal()
	a, b := prep("plan", 1), prep("plan", 2)
	a.Namespace, b.Namespace = "ns-a", "ns-b"
	for range 3 {
		run, created, err := j.PrepareRun(ctx, a)
		require.NoError(t, err)
		require.True(t, created)
		_, err = j.Transition(ctx, store.TransitionParams{OperationID: run.ID, From: store.StatePrepared, To: store.StateCompleted,
			Revision: run.Revision, Outcome: "completed", Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete", Status: "completed"}}})
		require.NoError(t, err)
	}
	run, created, err := j.PrepareRun(ctx, b)
	require.NoError(t, err)
	require.True(t, created, "B's digest differs from A's: A's runs are not B's")
	require.Equal(t, "plan:run-1", run.MutationID, "numbered as if A had never run")
	latest, err := j.LatestRun(ctx, "ns-a", "plan")
	require.NoError(t, err)
	require.Equal(t, "plan:run-3", latest.MutationID)

	found, err := j.FindInRuns(ctx, store.RunRecordParams{Namespace: "ns-b", Command: "plan", Kind: store.RecordCompletion, Step: "complete"})
	require.NoError(t, err)
	require.Nil(t, found, "A's completions are not in B's runs")
	found, err = j.FindInRuns(ctx, store.RunRecordParams{Namespace: "ns-a", Command: "plan", Kind: store.RecordCompletion, Step: "complete"})
	require.NoError(t, err)
	require.Equal(t, "plan:run-3", found.Run)

	_, err = j.Load(ctx, "", "plan:run-1")
	var pre *store.PreconditionError
	require.ErrorAs(t, err, &pre)
	require.Equal(t, store.ReasonMutationIDAmbiguous, pre.Reason)
	got, err := j.Load(ctx, "ns-b", "plan:run-1")
	require.NoError(t, err)
	require.Equal(t, run.ID, got.ID)
}
