package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/cause"
	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// What the journal shares beyond rows (docs/tenancy.md), tried as the role
// of namespace A with plain SQL against B: the run series (mutation IDs
// and run numbers), the live-run lock and prune. Each test here fails on a
// journal whose keys are not scoped by namespace (before migration 12).

// nsRun journals one run of plan in namespace ns through st (as PrepareRun
// does) and ends it: completed or refused.
func nsRun(t *testing.T, st *store.Store, ns, plan string, end store.State) *store.Operation {
	t.Helper()
	p := suite.ToyPreparation(plan, 7)
	p.Kind, p.Namespace = "ToyPlan", ns
	op, created, err := st.PrepareRun(t.Context(), p)
	require.NoError(t, err)
	require.True(t, created, "a new run of %s in %s", plan, ns)
	return endRun(t, st, op, end)
}

// endRun ends the open run op: completed, or refused.
func endRun(t *testing.T, st *store.Store, op *store.Operation, end store.State) *store.Operation {
	t.Helper()
	outcome, reason := "completed", ""
	ending := store.Record{Kind: store.RecordCompletion, Step: "complete", Status: "completed"}
	if end == store.StateRefused {
		outcome, reason = "refused", "test-refusal"
		ending = store.Record{Kind: store.RecordRefusal, Step: "refuse", Reason: store.Reason(reason)}
	}
	op, err := st.Transition(t.Context(), store.TransitionParams{OperationID: op.ID, From: op.State, To: end, Revision: op.Revision,
		Outcome: outcome, Reason: reason, Records: []store.Record{ending}})
	require.NoError(t, err)
	return op
}

// A's role inserts B's plan's run IDs, and forges finished runs of B's
// plan, in A's own namespace. A learns nothing (every insert succeeds,
// whatever B journaled), B's next sync numbers its run as if A had done
// nothing, and the owner's prune keeps every run of B it keeps without
// A's rows.
func TestIntegrationTenancyRunSeriesPerNamespace(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	a, b := twoTenants(e)
	const plan = "plan-shared"

	// B: run 1 completed, run 2 refused, run 3 completed.
	for _, end := range []store.State{store.StateCompleted, store.StateRefused, store.StateCompleted} {
		nsRun(t, b.st, b.ns, plan, end)
	}
	// A probes B's series: run numbers B holds and run numbers it does not
	// answer alike.
	for n := 1; n <= 6; n++ {
		_, err := a.conn.Exec(ctx, `INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name)
			VALUES ('ToyPlan', $1, 'r', $2, $3, 'name')`, store.RunID(plan, int64(n)), "sha256:"+strings.Repeat("b", 64), a.ns)
		require.NoError(t, err, "run %d: A learns nothing of B's series", n)
	}
	// A forges finished runs of the plan in its own namespace, newer than
	// all of B's: before migration 12 prune ranked them with B's.
	forged := suite.ToyPreparation(plan, 9)
	forged.Kind, forged.Namespace = "ToyPlan", a.ns
	for _, end := range []store.State{store.StateCompleted, store.StateRefused} {
		op, created, err := a.st.Prepare(ctx, forgedRun(forged, plan, end))
		require.NoError(t, err)
		require.True(t, created)
		endRun(t, a.st, op, end)
	}

	// B's next sync: run 4, created, as if A had done nothing.
	p := suite.ToyPreparation(plan, 7)
	p.Kind, p.Namespace = "ToyPlan", b.ns
	next, created, err := b.st.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, store.RunID(plan, 4), next.MutationID)
	endRun(t, b.st, next, store.StateRefused)

	// The owner prunes everything it may: B keeps run 3 (its newest
	// completed) and run 4 (its newest finished), as without A's rows.
	owner := suite.RoleStore(t, e.Journal.OwnerURL)
	_, err = owner.Prune(ctx, 0)
	require.NoError(t, err)
	runs, _, err := owner.RunsPage(ctx, store.RunsPageParams{Command: plan, Namespace: b.ns})
	require.NoError(t, err)
	var kept []string
	for _, r := range runs {
		kept = append(kept, r.MutationID)
	}
	require.Equal(t, []string{store.RunID(plan, 4), store.RunID(plan, 3)}, kept)
}

// forgedRun is what a role writes to make an operation look like run
// "forged" of plan to prune: the run's mutation ID and a preparation
// detail naming the command and run (as store.RunPreparation writes it).
func forgedRun(p store.PrepareParams, plan string, end store.State) store.PrepareParams {
	n := int64(100)
	if end == store.StateRefused {
		n = 101
	}
	return store.RunPreparation(store.PrepareParams{Kind: p.Kind, MutationID: plan, RequestID: p.RequestID,
		CommandDigest: p.CommandDigest, Namespace: p.Namespace, Name: p.Name}, n, store.RunLineage{})
}

// heldAdvisoryKeys are the advisory locks pg_locks shows any role, as
// 64-bit keys (the form keyledger's live-run lock takes).
func heldAdvisoryKeys(t *testing.T, conn *pgx.Conn) []int64 {
	t.Helper()
	rows, err := conn.Query(t.Context(), `SELECT DISTINCT (classid::int8 << 32) | objid::int8 FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND pid <> pg_backend_pid()`)
	require.NoError(t, err)
	keys, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return keys
}

// A's role holds every advisory lock it can see held (pg_locks shows every
// role every key), shared and exclusive. B's run whose driver is gone is
// resumed all the same (A's hold does not make it look live), and while
// B's next driver holds the run, A waiting for the key exclusively makes
// no later arrival of B wait.
func TestIntegrationTenancyLiveLockForeignHolder(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	a, b := twoTenants(e)
	p := suite.ToyPreparation("mut-live-foreign", 5)
	p.Kind, p.Namespace = "ToyPlan", b.ns
	p.Bound = store.RunBound{MaxResumes: 10}

	driver, err := store.Open(ctx, b.url)
	require.NoError(t, err)
	op, created, err := driver.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.True(t, created)
	// A cannot read the run's key; it takes what pg_locks shows.
	require.Zero(t, countRows(t, a.conn, `SELECT count(*) FROM keyledger.operations WHERE id = $1`, op.ID))
	keys := heldAdvisoryKeys(t, a.conn)
	require.NotEmpty(t, keys, "the driver's live lock is visible in pg_locks")
	for _, k := range keys {
		_, err := a.conn.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, k)
		require.NoError(t, err)
	}
	// B's driver ends (a crash: its session and its locks go).
	driver.Close()

	// B's next arrival resumes the run: A's hold is not B's.
	next := suite.RoleStore(t, b.url)
	again, created, err := next.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, op.ID, again.ID)
	require.Equal(t, 1, resumesOf(t, next, op.ID), "resumed, not joined as live on A's hold")

	// A asks for the key exclusively, on a session of its own: it waits
	// behind B's driver (next) and would make every later shared request
	// queue behind it.
	waiter := suite.Connect(t, a.url)
	var waiterPID int
	require.NoError(t, waiter.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&waiterPID))
	keys = heldAdvisoryKeys(t, a.conn)
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_lock(k) FROM unnest($1::int8[]) k`, keys)
		done <- err
	}()
	require.Eventually(t, func() bool {
		return countRows(t, a.conn, `SELECT count(*) FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND NOT granted`, waiterPID) == 1
	}, 30*time.Second, 50*time.Millisecond, "A's exclusive request waits")
	// B's next arrival joins the live run without waiting for A: its
	// answer comes while A's request still waits.
	joiner := suite.RoleStore(t, b.url)
	joined, created, err := joiner.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, op.ID, joined.ID)
	require.Equal(t, 1, resumesOf(t, joiner, op.ID), "joined as live: B's driver holds it")
	require.Equal(t, 1, countRows(t, a.conn, `SELECT count(*) FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND NOT granted`, waiterPID),
		"A still waits: B never queued behind it")
	var cancelled bool
	require.NoError(t, a.conn.QueryRow(ctx, `SELECT pg_cancel_backend($1)`, waiterPID).Scan(&cancelled))
	require.True(t, cancelled)
	require.Error(t, <-done)
}

// A run that holds a delete-pod call is the plan's memory of one restart
// per cause: prune keeps it, however many runs finished after it, and the
// next run still finds the call.
func TestIntegrationJournalPruneKeepsRestartMemory(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := e.RetentionJournal()
	ctx := t.Context()
	const plan = "plan-restart"
	cause := "sha256:" + strings.Repeat("c", 64)

	p := suite.ToyPreparation(plan, 7)
	p.Kind = "ToyPlan"
	op, created, err := j.Role.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.True(t, created)
	op, err = j.Role.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling,
		Revision: op.Revision, Records: []store.Record{{Kind: store.RecordAuthorityCall, Step: "delete-pod", Target: store.Target{Kind: store.TargetPod, Namespace: suite.ToyNamespace, Name: "server-0"},
			Attempt: 1, Digest: cause}}})
	require.NoError(t, err)
	endRun(t, j.Role, op, store.StateRefused)
	for _, end := range []store.State{store.StateRefused, store.StateRefused, store.StateCompleted} {
		toyRun(t, j.Role, plan, end, 0)
	}

	res, err := j.Owner.Prune(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), res.Operations, "runs 2 and 3 go; run 1 holds the restart, run 4 is the newest finished and completed")
	found, err := j.Role.FindInRuns(ctx, store.RunRecordParams{Namespace: suite.ToyNamespace, Command: plan,
		Kind: store.RecordAuthorityCall, Step: "delete-pod", Target: "pod/server-0", Digest: cause})
	require.NoError(t, err)
	require.NotNil(t, found, "the restart is remembered after the prune")
	require.Equal(t, store.RunID(plan, 1), found.Run)
}

// A's role fills PostgreSQL's shared lock table with advisory locks (no
// role can be kept from it: PostgreSQL has no per-role lock quota). B's
// runs meet an unavailable dependency with its reason (journal-out-of-
// memory, settled by a rerun; never a bug, never a wait), and converge
// once A lets go. On a server of its own: the lock table is the server's,
// and every other test's too.
func TestIntegrationTenancyLockTableExhaustion(t *testing.T) {
	t.Parallel()
	setup(t) // the platform's images are built
	ctx := t.Context()
	pg, err := platform.StartPostgres(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Terminate(context.WithoutCancel(ctx)) })
	nsA, nsB := "tenant-a", "tenant-b"
	journal, err := pg.NewJournal(ctx, "kl_locks", nsB)
	require.NoError(t, err)
	roleA, pw := "kl_ns_a_"+suite.RandomSuffix(t), suite.RandomSuffix(t)
	require.NoError(t, pg.EnsureRole(ctx, roleA, pw))
	require.NoError(t, platform.Grant(ctx, journal.OwnerURL, roleA, nsA))
	urlA, err := pg.URLFor(journal.OwnerURL, roleA, pw)
	require.NoError(t, err)

	p := suite.ToyPreparation("mut-locks", 3)
	p.Kind, p.Namespace = "ToyPlan", nsB
	b := suite.RoleStore(t, journal.OperatorURL)
	op, created, err := b.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.True(t, created)
	endRun(t, b, op, store.StateCompleted)

	// A takes advisory locks until PostgreSQL says the lock table is full;
	// session locks stay held past the failed statement.
	a := suite.Connect(t, urlA)
	var full error
	for i := int64(0); i < 1000 && full == nil; i++ {
		_, full = a.Exec(ctx, `SELECT pg_advisory_lock(k) FROM generate_series($1::int8, $1::int8 + 999) k`, i*1000)
	}
	require.Equal(t, "53200", sqlState(full), "the lock table is full: %v", full)

	// B's next sync cannot start a session, or hold its run: an
	// unavailable dependency a rerun settles, named.
	next, err := store.Open(ctx, journal.OperatorURL)
	if err == nil {
		_, _, err = next.PrepareRun(ctx, p)
		next.Close()
	}
	require.Error(t, err)
	c, ok := cause.Of(err)
	require.True(t, ok, "a dependency's failure, not a bug: %v", err)
	require.Equal(t, "journal-out-of-memory", c.Reason)
	require.True(t, c.Settles, "a rerun settles it")

	// A lets go: B's next sync converges.
	_, err = a.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
	require.NoError(t, err)
	again := suite.RoleStore(t, journal.OperatorURL)
	run, created, err := again.PrepareRun(ctx, p)
	require.NoError(t, err, "B converges once A lets go")
	if created {
		endRun(t, again, run, store.StateCompleted)
	}
}
