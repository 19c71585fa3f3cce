package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// resumesOf counts the resume-run records of operation id.
func resumesOf(t *testing.T, st *store.Store, id int64) int {
	t.Helper()
	records, err := st.Records(t.Context(), id)
	require.NoError(t, err)
	n := 0
	for _, r := range records {
		if r.Step == store.StepResumeRun {
			n++
		}
	}
	return n
}

// A run whose driver is alive (it holds the run's live lock: its Store is
// open) is joined by further arrivals, as the namespace role: no resume-run
// record, the run stays open however many arrive, past the resume bound.
// Once every driver's session ended, the next arrival resumes it (one
// record), the one after is past the bound (MaxResumes 1) and closes it
// (run-resume-limit) for run 2. The age bound closes a run even while it is
// live.
func TestIntegrationJournalLiveRunIsJoinedNotResumed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	url := e.NamespaceRole(suite.ToyNamespace)
	p := suite.ToyPreparation("mut-live", 1)
	p.Bound = store.RunBound{MaxResumes: 1}

	driver := suite.RoleStore(t, url)
	op, created, err := driver.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "mut-live:run-1", op.MutationID)

	joiner := suite.RoleStore(t, url)
	for i := range 3 { // three arrivals, past MaxResumes 1
		joined, created, err := joiner.PrepareRun(ctx, p)
		require.NoError(t, err, "arrival %d", i)
		require.False(t, created, "arrival %d", i)
		require.Equal(t, op.ID, joined.ID, "arrival %d joins the live run", i)
		require.False(t, joined.State.Terminal(), "arrival %d", i)
	}
	// One more, from a process that comes and goes.
	once := suite.RoleStore(t, url)
	joined, _, err := once.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.Equal(t, op.ID, joined.ID)
	once.Close()
	require.Zero(t, resumesOf(t, driver, op.ID), "no arrival counted as a resume while the run was live")
	live, err := driver.LatestRun(ctx, suite.ToyNamespace, "mut-live")
	require.NoError(t, err)
	require.Equal(t, op.ID, live.ID)
	require.False(t, live.State.Terminal(), "the live run is not closed")

	// The joiner still drives it (it holds the lock too): the driver's exit
	// alone does not make it resumable.
	driver.Close()
	passing := suite.RoleStore(t, url)
	_, _, err = passing.PrepareRun(ctx, p)
	require.NoError(t, err)
	passing.Close()
	require.Zero(t, resumesOf(t, joiner, op.ID), "a joiner is a live driver too")

	// Every driver gone: a resume, counted, then the bound.
	joiner.Close()
	after := suite.RoleStore(t, url)
	resumed, created, err := after.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, op.ID, resumed.ID)
	require.Equal(t, 1, resumesOf(t, after, op.ID), "the driver gone: the arrival resumed the run")
	after.Close()
	fresh, created, err := suite.RoleStore(t, url).PrepareRun(ctx, p)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "mut-live:run-2", fresh.MutationID)
	closed, _ := e.JournalOf("mut-live:run-1")
	require.Equal(t, store.ReasonRunResumeLimit, closed.Reason)

	// Run 2 is live (its Store is open), yet past its age: closed.
	aged := p
	aged.Bound = store.RunBound{MaxResumes: 1, MaxAge: time.Nanosecond}
	third, created, err := suite.RoleStore(t, url).PrepareRun(ctx, aged)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "mut-live:run-3", third.MutationID)
	closed, _ = e.JournalOf("mut-live:run-2")
	require.Equal(t, store.ReasonRunAgeLimit, closed.Reason, "the age bound holds for a live run")
}

// A desired-state run's questions between its moves (FindInRuns,
// FindEachInRuns: a rerun's proofs) go on the session that drives the run,
// which its moves use too: the run opens one session, not a second one
// (a connect, its authentication and its cold statements) for its reads.
// Before any run is prepared, they go on the pool's.
func TestIntegrationJournalRunReadsOnTheDriverSession(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	st := suite.RoleStore(t, e.NamespaceRole(suite.ToyNamespace))
	q := store.RunRecordParams{Namespace: suite.ToyNamespace, Command: "mut-reads", Kind: store.RecordPreparation, Step: "preparation"}
	found, err := st.FindInRuns(ctx, q)
	require.NoError(t, err)
	require.Nil(t, found, "no run yet")
	op, created, err := st.PrepareRun(ctx, suite.ToyPreparation("mut-reads", 2))
	require.NoError(t, err)
	require.True(t, created)
	each, err := st.FindEachInRuns(ctx, []store.RunRecordParams{q, {Namespace: suite.ToyNamespace, Command: "mut-reads", Kind: store.RecordCompletion, Step: "complete"}})
	require.NoError(t, err)
	require.Len(t, each, 2)
	require.NotNil(t, each[0], "the preparation of run 1")
	require.Equal(t, op.MutationID, each[0].Run)
	require.Nil(t, each[1])
	found, err = st.FindInRuns(ctx, q)
	require.NoError(t, err)
	require.NotNil(t, found)
	_, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling, Revision: op.Revision,
		Records: []store.Record{{Kind: store.RecordObservation, Step: "read"}}})
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Sessions(), "one session: the run's reads and moves share it")
}
