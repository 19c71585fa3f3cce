package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// metricQuery is one custom query of deploy/journal/metrics.yaml, as
// CloudNativePG reads it.
type metricQuery struct {
	Query           string                       `json:"query"`
	Primary         bool                         `json:"primary"`
	TargetDatabases []string                     `json:"target_databases"`
	Metrics         []map[string]json.RawMessage `json:"metrics"`
}

// shippedMetricQueries are the custom queries deploy/journal ships, by name.
func shippedMetricQueries(t *testing.T) map[string]metricQuery {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(platform.RepoRoot(), "deploy", "journal", "metrics.yaml"))
	require.NoError(t, err)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.Unmarshal(data, &cm))
	var queries map[string]metricQuery
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data["queries"]), &queries))
	require.NotEmpty(t, queries)
	return queries
}

// metricRow is one row of a metrics query: column name to its text.
type metricRow map[string]string

// metricsExporter makes a login role as CloudNativePG makes its
// cnpg_metrics_exporter (LOGIN, INHERIT, a member of pg_monitor, no other
// attribute or right) and returns its URL to the test's journal.
func metricsExporter(e *env) string {
	e.T.Helper()
	role, pw := "kl_exporter_"+suite.RandomSuffix(e.T), suite.RandomSuffix(e.T)
	require.NoError(e.T, suite.Postgres().EnsureRole(e.T.Context(), role, pw))
	admin := suite.Connect(e.T, suite.Postgres().AdminURL())
	_, err := admin.Exec(e.T.Context(), "GRANT pg_monitor TO "+pgx.Identifier{role}.Sanitize())
	require.NoError(e.T, err)
	url, err := suite.Postgres().URLFor(e.Journal.OwnerURL, role, pw)
	require.NoError(e.T, err)
	return url
}

// scrapeQuery runs sql as CloudNativePG runs a custom query: in a read-only
// transaction whose search_path is pg_catalog, public, pg_temp. It returns
// the rows with every column as text.
func scrapeQuery(ctx context.Context, conn *pgx.Conn, sql string) ([]metricRow, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "SET LOCAL search_path = pg_catalog, public, pg_temp"); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, "SELECT row_to_json(q)::text FROM ("+sql+") q")
	if err != nil {
		return nil, err
	}
	texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make([]metricRow, 0, len(texts))
	for _, text := range texts {
		var raw map[string]any
		if err := json.Unmarshal([]byte(text), &raw); err != nil {
			return nil, err
		}
		row := metricRow{}
		for k, v := range raw {
			row[k] = fmt.Sprint(v)
		}
		out = append(out, row)
	}
	return out, nil
}

// scrapeAll runs every shipped query as the role conn logged in as.
func scrapeAll(t *testing.T, conn *pgx.Conn, queries map[string]metricQuery) map[string][]metricRow {
	t.Helper()
	got := map[string][]metricRow{}
	for name, q := range queries {
		rows, err := scrapeQuery(t.Context(), conn, q.Query)
		require.NoError(t, err, "query %s", name)
		got[name] = rows
	}
	return got
}

// countOf is the count column of the one row whose labels are labels, or
// "" when there is none.
func countOf(t *testing.T, rows []metricRow, labels metricRow) string {
	t.Helper()
	found := ""
	for _, r := range rows {
		match := true
		for k, v := range labels {
			match = match && r[k] == v
		}
		if match {
			require.Empty(t, found, "two rows for %v", labels)
			found = r["count"]
		}
	}
	return found
}

// metricsJournal is two namespaces' operations, journaled by each one's own
// role: every identifier holds a canary that no metric may show.
type metricsJournal struct {
	a, b, canary string
	stA, stB     *store.Store
}

func newMetricsJournal(e *env) *metricsJournal {
	e.T.Helper()
	m := &metricsJournal{a: "metrics-a-" + suite.RandomSuffix(e.T), b: "metrics-b-" + suite.RandomSuffix(e.T), canary: "canary" + suite.RandomSuffix(e.T)}
	for _, s := range []struct {
		ns string
		st **store.Store
	}{{m.a, &m.stA}, {m.b, &m.stB}} {
		st, err := store.Open(e.T.Context(), e.NamespaceRole(s.ns))
		require.NoError(e.T, err)
		e.T.Cleanup(st.Close)
		*s.st = st
	}
	return m
}

// prepare journals one operation of kind in ns under a mutation ID and a
// Secret name that hold the canary.
func (m *metricsJournal) prepare(t *testing.T, st *store.Store, ns, kind, id string) *store.Operation {
	t.Helper()
	p := store.PrepareParams{Kind: kind, MutationID: m.canary + "-" + id, RequestID: "req-" + m.canary + "-" + id,
		CommandDigest: "sha256:" + strings.Repeat("0", 64), Namespace: ns, Name: "secret-" + m.canary + "-" + id}
	prepare := st.Prepare
	if kind == "CredentialPlan" {
		prepare = st.PrepareRun
	}
	op, created, err := prepare(t.Context(), p)
	require.NoError(t, err)
	require.True(t, created)
	return op
}

// end moves op from prepared to its ending: refused with reason, or
// completed when reason is "".
func (m *metricsJournal) end(t *testing.T, st *store.Store, op *store.Operation, reason string) {
	t.Helper()
	p := store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCompleted, Revision: op.Revision,
		Outcome: "completed", Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete"}}}
	if reason != "" {
		p.To, p.Outcome, p.Reason = store.StateRefused, "refused", reason
		p.Records = []store.Record{{Kind: store.RecordRefusal, Step: "refuse", Reason: store.Reason(reason)}}
	}
	_, err := st.Transition(t.Context(), p)
	require.NoError(t, err)
}

// The journal's metrics, as CloudNativePG's metrics role reads them
// (deploy/journal/metrics.yaml, migration 000013): every shipped query
// answers counts by namespace, family, state, outcome and reason, in a
// read-only transaction; no identifier of an operation reaches a row; the
// role cannot read any journal table or call any other journal function;
// and a namespace role cannot call the count functions at all, so it learns
// nothing of another namespace through them.
func TestIntegrationJournalMetricsCountsOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.OwnedJournal()
	ctx := t.Context()
	queries := shippedMetricQueries(t)
	m := newMetricsJournal(e)
	m.end(t, m.stA, m.prepare(t, m.stA, m.a, "KeyRetirement", "refused"), "key-active")
	m.prepare(t, m.stA, m.a, "KeyRetirement", "unfinished")
	m.prepare(t, m.stA, m.a, "CredentialPlan", "plan")
	m.end(t, m.stB, m.prepare(t, m.stB, m.b, "KeyRetirement", "refused"), "uid-changed")
	m.end(t, m.stB, m.prepare(t, m.stB, m.b, "SecretUpdate", "update"), "")

	exporter := suite.Connect(t, metricsExporter(e))
	got := scrapeAll(t, exporter, queries)
	t.Logf("metrics rows: %v", got)
	for name, q := range queries {
		require.True(t, q.Primary, "%s runs on the primary only", name)
		require.Equal(t, []string{"keyledger"}, q.TargetDatabases, name)
	}
	ops := got["keyledger_operations"]
	for labels, want := range map[[4]string]string{
		{m.a, "retirement", "refused", "refused"}: "1", {m.a, "retirement", "prepared", ""}: "1",
		{m.a, "credentials", "prepared", ""}: "1", {m.b, "retirement", "refused", "refused"}: "1",
		{m.b, "versioned", "completed", "completed"}: "1",
	} {
		require.Equal(t, want, countOf(t, ops, metricRow{"target_namespace": labels[0], "family": labels[1], "state": labels[2], "outcome": labels[3]}), "operations %v", labels)
	}
	refusals := got["keyledger_refusals"]
	require.Equal(t, "1", countOf(t, refusals, metricRow{"target_namespace": m.a, "family": "retirement", "reason": "key-active"}))
	require.Equal(t, "1", countOf(t, refusals, metricRow{"target_namespace": m.b, "family": "retirement", "reason": "uid-changed"}))
	require.Equal(t, "1", countOf(t, got["keyledger_uncertain_plans"], metricRow{"target_namespace": m.a}))
	require.Empty(t, countOf(t, got["keyledger_uncertain_plans"], metricRow{"target_namespace": m.b}))
	m.requireUnfinishedThreshold(t, exporter, got["keyledger_unfinished"])

	text, err := json.Marshal(got)
	require.NoError(t, err)
	require.NotContains(t, string(text), m.canary, "no mutation ID, request ID or Secret name in any metric")
	require.NotContains(t, string(text), "sha256:", "no digest in any metric")

	// One more refusal in A: its count rises by exactly one, B's stays.
	m.end(t, m.stA, m.prepare(t, m.stA, m.a, "KeyRetirement", "refused-again"), "key-active")
	again := scrapeAll(t, exporter, queries)["keyledger_refusals"]
	require.Equal(t, "2", countOf(t, again, metricRow{"target_namespace": m.a, "family": "retirement", "reason": "key-active"}))
	require.Equal(t, "1", countOf(t, again, metricRow{"target_namespace": m.b, "family": "retirement", "reason": "uid-changed"}))

	requireNoJournalReach(t, e, exporter)
	requireMetricsFunctionsPinned(t, e)

	// A namespace role is no member of pg_monitor: it reaches no count,
	// its own namespace's or another's.
	roleA := suite.Connect(t, e.NamespaceRole("metrics-c-"+suite.RandomSuffix(t)))
	for name, q := range queries {
		_, err := scrapeQuery(ctx, roleA, q.Query)
		require.Equal(t, "42501", sqlState(err), "%s as a namespace role: %v", name, err)
	}
}

// requireUnfinishedThreshold: the shipped threshold (15 minutes) leaves out
// operations just prepared (shipped, the rows of the shipped query); a
// threshold of zero counts A's two, none of B's; a negative one is refused.
func (m *metricsJournal) requireUnfinishedThreshold(t *testing.T, exporter *pgx.Conn, shipped []metricRow) {
	t.Helper()
	require.Empty(t, countOf(t, shipped, metricRow{"target_namespace": m.a}))
	unfinished, err := scrapeQuery(t.Context(), exporter, "SELECT target_namespace, family, state, operations AS count FROM keyledger_metrics.unfinished(interval '0')")
	require.NoError(t, err)
	require.Equal(t, "1", countOf(t, unfinished, metricRow{"target_namespace": m.a, "family": "retirement", "state": "prepared"}))
	require.Equal(t, "1", countOf(t, unfinished, metricRow{"target_namespace": m.a, "family": "credentials", "state": "prepared"}))
	require.Empty(t, countOf(t, unfinished, metricRow{"target_namespace": m.b}))
	_, err = scrapeQuery(t.Context(), exporter, "SELECT * FROM keyledger_metrics.unfinished(interval '-1 second')")
	require.Equal(t, "22023", sqlState(err), "a negative age is refused: %v", err)
}

// requireNoJournalReach: the metrics role reads no relation of the journal's
// schema (every table, view and sequence in it, listed by the owner) and
// calls no function of it.
func requireNoJournalReach(t *testing.T, e *env, exporter *pgx.Conn) {
	t.Helper()
	ctx := t.Context()
	rows, err := suite.Connect(t, e.Journal.OwnerURL).Query(ctx,
		`SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'keyledger'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')`)
	require.NoError(t, err)
	relations, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, relations, "operations")
	require.Contains(t, relations, "records")
	for _, rel := range relations {
		_, err := exporter.Exec(ctx, "SELECT 1 FROM keyledger."+pgx.Identifier{rel}.Sanitize()+" LIMIT 1")
		require.Equal(t, "42501", sqlState(err), "the metrics role reads keyledger.%s: %v", rel, err)
	}
	for _, call := range []string{"SELECT keyledger.granted_namespaces()", "SELECT * FROM keyledger.prune(interval '0')",
		"SELECT * FROM keyledger.newest_in_namespace('x', 1)"} {
		_, err := exporter.Exec(ctx, call)
		require.Equal(t, "42501", sqlState(err), "the metrics role calls %q: %v", call, err)
	}
}

// requireMetricsFunctionsPinned: every function of keyledger_metrics is the
// schema owner's, runs with a pinned search_path, and only the family
// mapping (which reads no table) runs as its caller.
func requireMetricsFunctionsPinned(t *testing.T, e *env) {
	t.Helper()
	owner := suite.Connect(t, e.Journal.OwnerURL)
	rows, err := owner.Query(t.Context(), `SELECT p.proname, p.prosecdef, pg_get_userbyid(p.proowner) = current_user,
		coalesce(array_to_string(p.proconfig, ','), '') FROM pg_proc p WHERE p.pronamespace = 'keyledger_metrics'::regnamespace`)
	require.NoError(t, err)
	var names []string
	for rows.Next() {
		var name, config string
		var definer, owned bool
		require.NoError(t, rows.Scan(&name, &definer, &owned, &config))
		names = append(names, name)
		require.True(t, owned, "%s is the schema owner's", name)
		require.Equal(t, name != "family", definer, "%s: SECURITY DEFINER", name)
		require.Contains(t, config, "search_path=pg_catalog, pg_temp", name)
	}
	require.NoError(t, rows.Err())
	slices.Sort(names)
	require.Equal(t, []string{"family", "operations", "refusals", "uncertain_plans", "unfinished"}, names)
}
