package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// toyRun journals one run of plan (as PrepareRun does) and ends it: state
// completed or refused, or left prepared when end is "". Each run appends
// extra observation records beside its preparation and ending.
func toyRun(t *testing.T, st *store.Store, plan string, end store.State, extra int) *store.Operation {
	t.Helper()
	p := suite.ToyPreparation(plan, 7)
	p.Kind = "ToyPlan"
	op, created, err := st.PrepareRun(t.Context(), p)
	require.NoError(t, err)
	require.True(t, created, "a new run of %s", plan)
	if end == "" {
		return op
	}
	records := make([]store.Record, 0, extra+1)
	for i := range extra {
		records = append(records, store.Record{Kind: store.RecordObservation, Step: "read-secret", Target: store.SecretTarget(suite.ToyNamespace, fmt.Sprintf("s-%d", i)), Status: "present"})
	}
	outcome, reason := "completed", ""
	if end == store.StateRefused {
		outcome, reason = "refused", "test-refusal"
		records = append(records, store.Record{Kind: store.RecordRefusal, Step: "refuse", Reason: store.Reason(reason)})
	} else {
		records = append(records, store.Record{Kind: store.RecordCompletion, Step: "complete", Status: store.Status(outcome)})
	}
	op, err = st.Transition(t.Context(), store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: end, Revision: op.Revision,
		Outcome: outcome, Reason: reason, Records: records})
	require.NoError(t, err)
	return op
}

// oneShot journals a one-shot operation under mutation and completes it.
func oneShot(t *testing.T, st *store.Store, mutation string) *store.Operation {
	t.Helper()
	op, created, err := st.Prepare(t.Context(), suite.ToyPreparation(mutation, 11))
	require.NoError(t, err)
	require.True(t, created)
	op, err = st.Transition(t.Context(), store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCompleted,
		Revision: op.Revision, Outcome: "completed", Records: []store.Record{
			{Kind: store.RecordObservation, Step: "read-configmap", Status: "present"},
			{Kind: store.RecordCompletion, Step: "complete", Status: "completed", Detail: store.DetailOf(map[string]any{"note": "done once"})}}})
	require.NoError(t, err)
	return op
}

func mutationIDs(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(t.Context(), `SELECT mutation_id FROM keyledger.operations ORDER BY mutation_id`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}

// journal prune removes the finished runs of plans, keeping each plan's
// newest finished and newest completed run, every unfinished operation and
// every one-shot operation (also one whose mutation ID looks like a run's);
// only the schema owner may prune, a namespace role is refused by
// PostgreSQL, and not even the owner deletes a row outside a prune.
func TestIntegrationJournalPruneKeepsWhatItMust(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := e.RetentionJournal()
	ctx := t.Context()

	// plan-a: 1 completed, 2 refused, 3 completed, 4 refused, 5 open.
	for _, end := range []store.State{store.StateCompleted, store.StateRefused, store.StateCompleted, store.StateRefused} {
		toyRun(t, j.Role, "plan-a", end, 2)
	}
	toyRun(t, j.Role, "plan-a", "", 0)
	// plan-b: one completed run.
	toyRun(t, j.Role, "plan-b", store.StateCompleted, 1)
	// one-shot operations, one of them named like a run.
	shot := oneShot(t, j.Role, "shot-1")
	oneShot(t, j.Role, "lookalike:run-1")
	before := mutationIDs(t, j.OwnerConn)
	require.Len(t, before, 8)
	recordsOf := func(mutation string) int {
		return countRows(t, j.OwnerConn, `SELECT count(*) FROM keyledger.records r JOIN keyledger.operations o ON o.id = r.operation_id
			WHERE o.mutation_id = $1`, mutation)
	}
	removable := recordsOf("plan-a:run-1") + recordsOf("plan-a:run-2")
	require.Equal(t, 8, removable, "preparation, two observations and an ending each")

	// A namespace role: the CLI is refused (exit 64, nothing removed), and
	// PostgreSQL refuses the function and a DELETE to the role itself.
	r := e.Keyledger([]string{"journal", "prune", "--older-than", "0s"}, suite.WithDatabase(j.RoleURL))
	require.Equal(t, 64, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stderr, "[not-schema-owner, exit 64]")
	require.Empty(t, r.Stdout)
	_, err := j.RoleConn.Exec(ctx, `SELECT * FROM keyledger.prune(interval '0')`)
	require.Equal(t, "42501", sqlState(err), "a namespace role may not execute keyledger.prune: %v", err)
	_, err = j.RoleConn.Exec(ctx, `DELETE FROM keyledger.records`)
	require.Equal(t, "42501", sqlState(err), "a namespace role holds no DELETE: %v", err)
	_, err = j.RoleConn.Exec(ctx, `DELETE FROM keyledger.operations`)
	require.Equal(t, "42501", sqlState(err), "a namespace role holds no DELETE: %v", err)
	// The owner outside a prune: refused by the delete guards.
	_, err = j.OwnerConn.Exec(ctx, `DELETE FROM keyledger.records WHERE operation_id = (SELECT id FROM keyledger.operations WHERE mutation_id = 'plan-a:run-1')`)
	require.Equal(t, "42501", sqlState(err), "the owner deletes only within a prune: %v", err)
	_, err = j.OwnerConn.Exec(ctx, `DELETE FROM keyledger.operations WHERE mutation_id = 'plan-a:run-1'`)
	require.Equal(t, "42501", sqlState(err), "the owner deletes only within a prune: %v", err)
	// ... and an owner who forges a prune event still cannot remove an
	// unfinished operation, nor a record of one.
	tx, err := j.OwnerConn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO keyledger.prune_events (older_than, cutoff, operations, records) VALUES (interval '0', now() + interval '1 day', 0, 0)`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `DELETE FROM keyledger.records WHERE operation_id = (SELECT id FROM keyledger.operations WHERE mutation_id = 'plan-a:run-5')`)
	require.Equal(t, "42501", sqlState(err), "an unfinished operation's records are kept: %v", err)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, before, mutationIDs(t, j.OwnerConn), "nothing removed")

	// The owner, with an age nothing is older than: nothing removed.
	owner := suite.WithDatabase(e.Journal.OwnerURL)
	r = e.Keyledger([]string{"journal", "prune", "--older-than", "1h"}, owner)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "pruned 0 operations and 0 records finalized before ")
	require.Equal(t, before, mutationIDs(t, j.OwnerConn))

	// Every age: runs 1 and 2 of plan-a go, with their records.
	r = e.Keyledger([]string{"journal", "prune", "--older-than", "0s", "-o", "json"}, owner)
	require.Equal(t, 0, r.Code, r.Stderr)
	var res store.PruneResult
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
	require.EqualValues(t, 2, res.Operations)
	require.EqualValues(t, removable, res.Records)
	require.Equal(t, map[string]int64{"preparation": 2, "observation": 4, "completion": 1, "refusal": 1}, res.RecordKinds)
	require.Equal(t, []string{"lookalike:run-1", "plan-a:run-3", "plan-a:run-4", "plan-a:run-5", "plan-b:run-1", "shot-1"},
		mutationIDs(t, j.OwnerConn), "kept: newest completed (3) and newest finished (4) run of plan-a, the open run, plan-b's only run, every one-shot")
	require.Zero(t, countRows(t, j.OwnerConn, `SELECT count(*) FROM keyledger.records r
		WHERE NOT EXISTS (SELECT 1 FROM keyledger.operations o WHERE o.id = r.operation_id)`))

	// The prune is journaled: who, the cutoff and the counts, append-only.
	events, err := j.Owner.PruneEvents(ctx)
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Equal(t, suite.RoleOf(t, e.Journal.OwnerURL), events[1].SessionRole)
	require.EqualValues(t, 2, events[1].Operations)
	require.EqualValues(t, removable, events[1].Records)
	_, err = j.OwnerConn.Exec(ctx, `DELETE FROM keyledger.prune_events`)
	require.Error(t, err, "prune events are append-only")
	_, err = j.RoleConn.Exec(ctx, `SELECT count(*) FROM keyledger.prune_events`)
	require.Equal(t, "42501", sqlState(err), "a namespace role does not read the prune events: %v", err)

	// A pruned plan goes on where it was: the open run resumes, the next
	// is run 6 (never a number a pruned run had).
	p := suite.ToyPreparation("plan-a", 7)
	p.Kind = "ToyPlan"
	op, created, err := j.Role.PrepareRun(ctx, p)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, "plan-a:run-5", op.MutationID)
	_, err = j.Role.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCompleted, Revision: op.Revision,
		Outcome: "completed", Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete", Status: "completed"}}})
	require.NoError(t, err)
	require.Equal(t, "plan-a:run-6", toyRun(t, j.Role, "plan-a", store.StateCompleted, 0).MutationID)

	// A one-shot command is its own tombstone: the same command replays
	// (the operation and its ending as they were), another is refused.
	again, created, err := j.Role.Prepare(ctx, suite.ToyPreparation("shot-1", 11))
	require.NoError(t, err)
	require.False(t, created, "the same one-shot command is not prepared again after a prune")
	require.Equal(t, shot.ID, again.ID)
	require.Equal(t, store.StateCompleted, again.State)
	_, records, err := j.Role.Snapshot(ctx, "", "shot-1")
	require.NoError(t, err)
	require.Equal(t, "done once", workflowtest.Fields((&workflow.Run{Op: again, Records: records}).Ending())["note"])
	_, _, err = j.Role.Prepare(ctx, suite.ToyPreparation("shot-1", 12))
	require.ErrorIs(t, err, store.ErrDigestMismatch, "another command under a pruned journal's one-shot mutationId is still refused")

	// migrate down keeps the prune events unless told to destroy them
	// (every migration after 6 goes down first without the flag).
	e.MigrateDownTo(6, owner)
	r = e.Keyledger([]string{"migrate", "down"}, owner)
	require.Equal(t, 64, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stderr, "migration 6 down would drop keyledger.prune_events, which holds 2 prune events")
	require.Contains(t, r.Stderr, "[journal-not-empty, exit 64]")
	require.Equal(t, 2, countRows(t, j.OwnerConn, `SELECT count(*) FROM keyledger.prune_events`))
}

// After a prune, a plan's journal holds the same rows whether it ran 3 or
// 30 times: the size does not follow the number of syncs.
func TestIntegrationJournalPruneSizeIndependentOfRuns(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := e.RetentionJournal()
	for _, plan := range []struct {
		name string
		runs int
	}{{"few", 3}, {"many", 30}} {
		for range plan.runs {
			toyRun(t, j.Role, plan.name, store.StateCompleted, 3)
		}
	}
	size := func(plan string) (ops, records, bytes int) {
		t.Helper()
		require.NoError(t, j.OwnerConn.QueryRow(t.Context(), `SELECT count(DISTINCT o.id), count(r.id),
			coalesce(sum(pg_column_size(r.*)), 0) + coalesce(sum(DISTINCT pg_column_size(o.*)), 0)
			FROM keyledger.operations o JOIN keyledger.records r ON r.operation_id = o.id
			WHERE o.mutation_id LIKE $1 || ':run-%'`, plan).Scan(&ops, &records, &bytes))
		return
	}
	fewOps, _, _ := size("few")
	manyOps, _, _ := size("many")
	require.Equal(t, []int{3, 30}, []int{fewOps, manyOps})
	_, err := j.Owner.Prune(t.Context(), 0)
	require.NoError(t, err)
	fo, fr, fb := size("few")
	mo, mr, mb := size("many")
	require.Equal(t, 1, fo, "one run kept (the newest, finished and completed)")
	require.Equal(t, []int{fo, fr}, []int{mo, mr}, "same operations and records after 3 and 30 runs")
	require.InDelta(t, fb, mb, 64, "same bytes (up to the digits of the run number): %d and %d", fb, mb)
}

// journal show pages a plan's runs, newest first, --limit at a time, with
// --before for the next page; limits out of range are usage errors.
func TestIntegrationJournalShowPages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := e.RetentionJournal()
	for range 12 {
		toyRun(t, j.Role, "paged", store.StateCompleted, 0)
	}
	as := suite.WithDatabase(j.RoleURL)
	runs := func(args ...string) []int64 {
		t.Helper()
		r := e.Keyledger(append([]string{"journal", "show", "paged", "-o", "json"}, args...), as)
		require.Equal(t, 0, r.Code, r.Stderr)
		var shown []struct {
			Run int64 `json:"run"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &shown), r.Stdout)
		var out []int64
		for _, s := range shown {
			out = append(out, s.Run)
		}
		return out
	}
	require.Equal(t, []int64{12, 11, 10, 9, 8, 7, 6, 5, 4, 3}, runs(), "default page: the newest 10")
	require.Equal(t, []int64{12, 11, 10}, runs("--limit", "3"))
	require.Equal(t, []int64{9, 8, 7}, runs("--limit", "3", "--before", "10"))
	require.Equal(t, []int64{2, 1}, runs("--before", "3"))
	r := e.Keyledger([]string{"journal", "show", "paged", "--limit", "4"}, as)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, 4, strings.Count(r.Stdout, "mutation paged:run-"))
	require.Contains(t, r.Stdout, "older runs: keyledger journal show paged --before 9")
	for _, bad := range [][]string{{"show", "paged", "--limit", "101"}, {"show", "paged", "--limit", "0"}, {"list", "--limit", "1001"}} {
		r := e.Keyledger(append([]string{"journal"}, bad...), as)
		require.Equal(t, 64, r.Code, "%v: %s", bad, r.Stderr)
		require.Contains(t, r.Stderr, "--limit must be from 1 to")
	}
}

// explainPlan is EXPLAIN (FORMAT JSON) of query as conn's role, as text.
func explainPlan(t *testing.T, conn *pgx.Conn, query string, args ...any) string {
	t.Helper()
	var plan []map[string]any
	require.NoError(t, conn.QueryRow(t.Context(), "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&plan))
	b, err := json.Marshal(plan)
	require.NoError(t, err)
	return string(b)
}

// The readers that grow with the journal are served by indexes, as a
// namespace role runs them on a journal of thousands of runs: the newest
// run and a page of runs by the run-series index, a target's step records
// by their targets' index, never a scan of operations or records.
func TestIntegrationJournalReadersUseIndexes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := e.RetentionJournal()
	ctx := t.Context()
	// 3000 operations on 300 targets (3 records each), as the owner in one
	// statement, then statistics.
	_, err := j.OwnerConn.Exec(ctx, `
		WITH ops AS (
		  INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name)
		  SELECT 'ToyPlan', 'bulk-' || (g % 300) || ':run-' || (g / 300 + 1), 'req', 'sha256:' || repeat('0', 64), $1, 'name-' || (g % 300)
		  FROM generate_series(0, 2999) g
		  RETURNING id)
		INSERT INTO keyledger.records (operation_id, kind, step, target, uid)
		SELECT id, 'observation', s, 'secret/x-' || (id % 300), 'uid-1' FROM ops, unnest(ARRAY['read-secret', 'create-snapshot', 'probe-server']) s`, suite.ToyNamespace)
	require.NoError(t, err)
	_, err = j.OwnerConn.Exec(ctx, `ANALYZE keyledger.operations; ANALYZE keyledger.records`)
	require.NoError(t, err)
	sql := store.ReaderSQL()
	explainArgs := map[string][]any{
		"latest-run":   {"bulk-7", suite.ToyNamespace},
		"runs-page":    {"bulk-7", "", 11, suite.ToyNamespace},
		"step-records": {suite.ToyNamespace, "name-7", "create-snapshot", "uid-1", []string{"secret/x-7", "secret/x-8"}},
		"runs-record":  {"bulk-7", "observation", "create-snapshot", "secret/x-7", "", "", suite.ToyNamespace, ""},
	}
	plans := map[string]string{}
	for name, args := range explainArgs {
		plans[name] = explainPlan(t, j.RoleConn, sql[name], args...)
	}
	for name, plan := range plans {
		t.Logf("EXPLAIN %s:\n%s", name, suite.ExplainText(t, j.RoleConn, sql[name], explainArgs[name]...))
		require.NotRegexp(t, `"Node Type":"Seq Scan"[^}]*"Relation Name":"(operations|records)"`, plan, "%s scans a table", name)
	}
	// An index condition, not a filter over the whole index: under
	// row-level security only a leakproof comparison (run_series = $1,
	// target_namespace = $n) can be one; the namespace leads (migration 12).
	for _, name := range []string{"latest-run", "runs-page", "runs-record"} {
		require.Contains(t, plans[name], `"Index Cond":"((target_namespace = 'ns'::text) AND (run_series = 'bulk-7'::text))"`, name)
	}
	// The step records by their listed targets (migration 10), never by
	// every operation on the Secret (TestIntegrationHistoryProvenanceBounded).
	require.Contains(t, plans["step-records"], `"Index Name":"records_snapshot_target"`)
	require.Contains(t, plans["step-records"], `"Index Cond":"(target = ANY ('{secret/x-7,secret/x-8}'::text[]))"`)

	// And they answer: the newest run of bulk-7 is run 10.
	op, err := j.Role.LatestRun(ctx, suite.ToyNamespace, "bulk-7")
	require.NoError(t, err)
	require.Equal(t, "bulk-7:run-10", op.MutationID)
}

// An operation whose step was sent store.MaxCallAttempt times is refused
// with attempt-limit (exit 2's reason) when it would send once more,
// before the journal's CHECK (attempt <= 1000) could fire; nothing is sent.
func TestIntegrationEngineAttemptLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	cm := e.NewConfigMap("attempts")
	const mutation = "mut-attempts"
	client, err := kube.NewClient(e.Kube.Config())
	require.NoError(t, err)
	plan := suite.ToyPlan(client, e.NS, cm.Name, mutation)
	st := e.OperatorStore()
	op, _, err := st.Prepare(ctx, plan.Prepare)
	require.NoError(t, err)
	calls := make([]store.Record, store.MaxCallAttempt)
	for i := range calls {
		calls[i] = store.Record{Kind: store.RecordAuthorityCall, Step: suite.ToyStep, Attempt: i + 1, Batch: i + 1, Final: true,
			UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}
	}
	op, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling, Revision: op.Revision, Records: calls})
	require.NoError(t, err)
	_, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StateCalling, To: store.StateResolving, Revision: op.Revision,
		Records: []store.Record{{Kind: store.RecordAuthorityResult, Step: suite.ToyStep, Status: "lost", Reason: "no-result-recorded"}}})
	require.NoError(t, err)

	_, err = suite.RunToy(ctx, client, e.Journal.OperatorURL, e.NS, cm.Name, mutation)
	var refused *workflow.Refused
	require.ErrorAs(t, err, &refused, "%v", err)
	require.Equal(t, workflow.ReasonAttemptLimit, refused.Reason)
	final, records := e.JournalOf(mutation)
	require.Equal(t, store.StateRefused, final.State)
	require.Equal(t, workflow.ReasonAttemptLimit, final.Reason)
	require.Equal(t, store.MaxCallAttempt, suite.Count(records, store.RecordAuthorityCall), "no call beyond the limit journaled")
	ending := records[len(records)-1]
	require.EqualValues(t, store.MaxCallAttempt, workflowtest.Fields(ending.Detail)["attempts"])
	got, err := e.Kube.Client().CoreV1().ConfigMaps(e.NS).Get(ctx, cm.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, cm.ResourceVersion, got.ResourceVersion, "nothing sent")
	require.True(t, slices.ContainsFunc(records, func(r store.Record) bool { return r.Kind == store.RecordResolution }), "the resolution that found it not applied is journaled")
}
