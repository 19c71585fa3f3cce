package bench

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// journalOpsEnv changes the size of TestBenchJournalSize's large journal.
const journalOpsEnv = "KEYLEDGER_BENCH_JOURNAL_OPS"

// defaultJournalOps is the large journal's size when journalOpsEnv is
// unset: a million operations take 3 to 13 minutes to load on a busy
// 2-core machine (16 to 80 s per 100,000 with every index), too long for
// every make bench; KEYLEDGER_BENCH_JOURNAL_OPS=1000000 measures them.
const defaultJournalOps = 100_000

// listQueryBefore8 is journal list's SQL before migration 8 (the newest of
// every operation, filtered by row-level security), EXPLAINed beside
// today's for the before and after.
const listQueryBefore8 = `SELECT id FROM keyledger.operations ORDER BY created_at DESC, id DESC LIMIT $1`

// bulkNamespacesSQL is how many target namespaces the bulk-loaded operations
// spread over; one in bulkNamespaces of them is in the test's namespace,
// the one the namespace role (the operator role) was granted.
const bulkNamespacesSQL = "20"

// bulkChunk is how many operations one load statement inserts.
const bulkChunk = 100_000

// bulkLoadSQL inserts operations $1 to $2 (of $3 in all) as copies of the
// finished operations in the template tables (bulkTemplatesSQL), each with
// its records. Operation g is template g % 3, in quietNamespace when g <
// 50, else in namespace $4 when g % bulkNamespacesSQL is 0 (else tenant-NN), created
// (30 s apart, the newest last) so that the journal spans about a year;
// plan runs are runs of 1,000 plans (mutation ID, run_series, run_number
// and the preparation's command and run as PrepareRun journals them),
// retirements and updates one-shot mutation IDs on 5,000 Secrets.
const bulkLoadSQL = `
WITH g AS (
  SELECT g, g % 3 AS family, g / 3 AS i,
         now() - (($3::bigint - g) * interval '30 seconds') - interval '1 hour' AS at
    FROM generate_series($1::bigint, $2::bigint) g
), ops AS (
  INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name,
                                    expected_uid, state, revision, outcome, reason, created_at, updated_at, finalized_at, finished_xact)
  SELECT t.kind,
         CASE WHEN t.kind = 'CredentialPlan' THEN 'bulk-plan-' || (g.i % 1000) || ':run-' || (g.i / 1000 + 1)
              ELSE 'bulk-' || g.family || '-' || g.i END,
         'req-bulk-' || g.g,
         'sha256:' || encode(sha256(convert_to('bulk-' || g.g, 'UTF8')), 'hex'),
         CASE WHEN g.g < 50 THEN '` + quietNamespace + `' WHEN g.g % ` + bulkNamespacesSQL + ` = 0 THEN $4 ELSE 'tenant-' || lpad((g.g % ` + bulkNamespacesSQL + `)::text, 2, '0') END,
         CASE WHEN t.kind = 'CredentialPlan' THEN 'bulk-owner-' || (g.i % 1000) ELSE 'bulk-secret-' || (g.i % 5000) END,
         t.expected_uid, t.state, t.revision, t.outcome, t.reason,
         g.at, g.at + (t.updated_at - t.created_at), g.at + (t.finalized_at - t.created_at), pg_current_xact_id()
    FROM g JOIN bulk_template_ops t USING (family)
  RETURNING id, kind, run_series, run_number, created_at
)
INSERT INTO keyledger.records (operation_id, kind, step, target, attempt, uid, resource_version, digest, status, reason,
                               batch, final, detail, created_at)
SELECT o.id, r.kind, r.step, r.target, r.attempt, r.uid, r.resource_version, r.digest, r.status, r.reason, r.batch, r.final,
       CASE WHEN r.kind = 'preparation' AND o.run_series IS NOT NULL
            THEN r.detail || jsonb_build_object('command', o.run_series, 'run', o.run_number)
            ELSE r.detail END,
       o.created_at + r.after
  FROM ops o JOIN bulk_template_records r ON r.op_kind = o.kind
 ORDER BY o.id, r.id`

// bulkTemplatesSQL makes the session's typed template tables from $1 (a
// JSON array of {"op": operation row, "records": [record rows]}, one per
// family, as real runs journaled them): template g % 3 is family g.
const bulkTemplatesSQL = `
CREATE TEMP TABLE bulk_template_ops AS
  SELECT (a.ord - 1)::int AS family, o.* FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS a(x, ord)
  CROSS JOIN LATERAL jsonb_populate_record(NULL::keyledger.operations, a.x->'op') o;
CREATE TEMP TABLE bulk_template_records AS
  SELECT (a.x->'op'->>'kind') AS op_kind, r.*, r.created_at - (a.x->'op'->>'created_at')::timestamptz AS after
    FROM jsonb_array_elements($1::jsonb) a(x)
  CROSS JOIN LATERAL jsonb_populate_recordset(NULL::keyledger.records, a.x->'records') r`

// bulkInvariantsSQL counts the bulk-loaded operations that break what the
// triggers lifted for the load would have enforced: an operation must
// have exactly one preparation and one ending matching its state, and
// every record's time lies within its operation's life.
const bulkInvariantsSQL = `
SELECT count(*) FROM (
  SELECT o.id FROM keyledger.operations o LEFT JOIN keyledger.records r ON r.operation_id = o.id
   WHERE o.mutation_id LIKE 'bulk-%'
   GROUP BY o.id
  HAVING count(*) FILTER (WHERE r.kind = 'preparation') <> 1
      OR count(*) FILTER (WHERE r.kind = CASE o.state WHEN 'completed' THEN 'completion'::keyledger.record_kind
                                                      ELSE 'refusal'::keyledger.record_kind END) <> 1
      OR bool_or(r.created_at < o.created_at OR r.created_at > o.finalized_at)
) broken`

// loadJournal bulk-loads ops finished operations copied from templates
// into the journal at ownerURL, as its schema owner, bulkChunk per
// transaction. Every CHECK, NOT NULL, UNIQUE and FOREIGN KEY constraint,
// the enums and the generated columns hold as they do in production; the
// user triggers (ids and times stamped with now(), "an operation starts
// prepared", "nothing appended to a final operation", "a final operation
// carries its ending") are lifted inside each load transaction, as
// migrations 4 and 5 lift them for their fills, because they would make
// every operation an INSERT then an UPDATE, give every row of a
// transaction the same time, and lock an operation per record; what they
// guarantee is checked once after the load instead (bulkInvariantsSQL).
func loadJournal(t *testing.T, ownerURL, templates, ns string, ops int) time.Duration {
	t.Helper()
	ctx := t.Context()
	conn := suite.Connect(t, ownerURL)
	start := time.Now()
	// Two statements: the second reads the table the first creates.
	for _, stmt := range strings.SplitAfter(bulkTemplatesSQL, ";") {
		_, err := conn.Exec(ctx, stmt, templates)
		require.NoError(t, err, "the load's templates")
	}
	for from := 0; from < ops; from += bulkChunk {
		to := min(from+bulkChunk, ops) - 1
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `ALTER TABLE keyledger.operations DISABLE TRIGGER USER;
				ALTER TABLE keyledger.records DISABLE TRIGGER USER`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, bulkLoadSQL, from, to, ops, ns); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `ALTER TABLE keyledger.operations ENABLE TRIGGER USER;
				ALTER TABLE keyledger.records ENABLE TRIGGER USER`)
			return err
		})
		require.NoError(t, err, "loading operations %d to %d", from, to)
	}
	// One backend, here and in VACUUM: parallel workers would need more
	// shared memory than a container's /dev/shm holds for a million
	// operations.
	_, err := conn.Exec(ctx, `SET max_parallel_workers_per_gather = 0`)
	require.NoError(t, err)
	var broken int
	require.NoError(t, conn.QueryRow(ctx, bulkInvariantsSQL).Scan(&broken))
	require.Zero(t, broken, "bulk-loaded operations that break the journal's invariants")
	for _, table := range []string{"operations", "records"} {
		_, err := conn.Exec(ctx, `VACUUM (ANALYZE, PARALLEL 0) keyledger.`+table)
		require.NoError(t, err)
	}
	return time.Since(start)
}

// journalTemplates reads the given operations (one per family, as real
// runs journaled them) with their records, as the JSON bulkLoadSQL takes.
func journalTemplates(t *testing.T, ownerURL string, mutations ...string) string {
	t.Helper()
	conn := suite.Connect(t, ownerURL)
	var out string
	require.NoError(t, conn.QueryRow(t.Context(), `
		SELECT jsonb_agg(jsonb_build_object('op', to_jsonb(o),
		         'records', (SELECT jsonb_agg(to_jsonb(r) ORDER BY r.id) FROM keyledger.records r WHERE r.operation_id = o.id))
		         ORDER BY array_position($1::text[], o.mutation_id))
		  FROM keyledger.operations o WHERE o.mutation_id = ANY ($1::text[])`, mutations).Scan(&out))
	return out
}

// journalSizeBench is one journal of TestBenchJournalSize.
type journalSizeBench struct {
	label   string
	journal *platform.Journal
	ops     int
	// quietURL connects as a namespace role granted only quietNamespace.
	quietURL  string
	retire    []time.Duration
	list      []time.Duration
	quietList []time.Duration
}

// quietNamespace holds the 50 oldest bulk-loaded operations and nothing
// else: a tenant whose journal list must find them among everyone's.
const quietNamespace = "tenant-quiet"

// TestBenchJournalSize measures a retirement run and `journal list` (both
// processes of the release binary, as namespace roles under row-level
// security) on a journal of 1,000 finished operations and on a large one,
// interleaved, and prints the ratios (goal: at most 1.2) and the plans of
// the journal queries a run and journal list make (EXPLAIN (ANALYZE,
// BUFFERS) as the namespace role), which show why. journal list is
// measured for the namespace role of the runs (one operation in 20 is its
// namespace's) and for a quiet tenant's role (its namespace holds only the
// 50 oldest operations). The operations are bulk-loaded copies of a
// retirement, a credential plan run and a versioned update journaled by
// real runs (loadJournal says what holds during the load). The large
// journal holds KEYLEDGER_BENCH_JOURNAL_OPS operations (default
// defaultJournalOps).
func TestBenchJournalSize(t *testing.T) {
	benchEnabled(t)
	e := suite.Setup(t)
	bin := releaseBinary(t)
	large := defaultJournalOps
	if v, err := strconv.Atoi(os.Getenv(journalOpsEnv)); err == nil && v >= 1000 {
		large = v
	}
	ctx := t.Context()

	// One finished operation of each family, journaled by real runs.
	m := suite.StandardKeyring()
	tmpl := e.CreateSecret(suite.KeyringSecret("tmpl-ret", m))
	r := e.Keyledger([]string{"run", e.WriteCommand("tmpl-ret.json", suite.RetireCommand(tmpl, "k-2026-06", "tmpl-ret"))}, e.AsRetirerOf(tmpl), withBinary(bin))
	require.Equal(t, 0, r.Code, r.Stderr)
	plan := suite.CredentialPlan(e.NS, "tmpl-plan", []suite.PlanSecret{suite.StandardSecret("tmpl-plan-a"), suite.StandardSecret("tmpl-plan-b")})
	r = e.Keyledger([]string{"run", e.WriteCommand("tmpl-plan.json", plan)}, e.AsCredentialRunner(plan), withBinary(bin))
	require.Equal(t, 0, r.Code, r.Stderr)
	live := e.CreateSecret(suite.PlainSecret("tmpl-upd", map[string][]byte{"password": []byte("tmpl-value-0")}))
	suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, live.Name, live.ResourceVersion, "tmpl-upd", map[string][]byte{"password": []byte("tmpl-value-1")}),
		e.AsWriter(live.Name), withBinary(bin)), "completed")
	templates := journalTemplates(t, e.Journal.OwnerURL, "tmpl-ret", "tmpl-plan:run-1", "tmpl-upd")

	big, err := suite.Postgres().NewJournal(ctx, "kl_"+suite.RandomSuffix(t), e.NS, suite.ToyNamespace)
	require.NoError(t, err)
	small := &journalSizeBench{label: "ops=1000", journal: e.Journal, ops: 1000}
	huge := &journalSizeBench{label: fmt.Sprintf("ops=%d", large), journal: big, ops: large}
	quiet, pw := "kl_quiet_"+suite.RandomSuffix(t), suite.RandomSuffix(t)
	require.NoError(t, suite.Postgres().EnsureRole(ctx, quiet, pw))
	for _, b := range []*journalSizeBench{small, huge} {
		require.NoError(t, platform.Grant(ctx, b.journal.OwnerURL, quiet, quietNamespace))
		b.quietURL, err = suite.Postgres().URLFor(b.journal.OwnerURL, quiet, pw)
		require.NoError(t, err)
	}
	loadJournal(t, small.journal.OwnerURL, templates, e.NS, small.ops-3)
	took := loadJournal(t, huge.journal.OwnerURL, templates, e.NS, huge.ops)
	var records int64
	require.NoError(t, suite.Connect(t, huge.journal.OwnerURL).QueryRow(ctx, `SELECT count(*) FROM keyledger.records`).Scan(&records))
	suite.BenchLine("journal-size bulk load: operations=%d records=%d in %s (%s per 100,000 operations, with every index; default size %d, %s=N changes it)",
		huge.ops, records, took.Round(time.Second), (took * 100_000 / time.Duration(huge.ops)).Round(time.Millisecond), defaultJournalOps, journalOpsEnv)

	const runs = 15
	list := func(url string) time.Duration {
		t.Helper()
		cmd := exec.Command(bin, "journal", "list")
		cmd.Env = benchEnv(e, url, cmd.Args[1:])
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		require.NoError(t, cmd.Run(), "journal list: %s", stderr.String())
		wall := time.Since(start)
		require.Equal(t, 51, strings.Count(stdout.String(), "\n"), "journal list prints a header and 50 operations")
		return wall
	}
	for i := range runs {
		order := []*journalSizeBench{small, huge}
		if i%2 == 1 {
			order = []*journalSizeBench{huge, small}
		}
		for _, b := range order {
			name := fmt.Sprintf("size-%d-%d", b.ops, i)
			s := e.CreateSecret(suite.KeyringSecret(name, m))
			path := e.WriteCommand(name+".json", suite.RetireCommand(s, "k-2026-06", "mut-"+name))
			b.retire = append(b.retire, measureRun(e, t, bin, []string{"run", path}, b.journal.OperatorURL, e.AsRetirerOf(s)).Wall)
			b.list = append(b.list, list(b.journal.OperatorURL))
			b.quietList = append(b.quietList, list(b.quietURL))
		}
	}
	for _, b := range []*journalSizeBench{small, huge} {
		suite.BenchLine("journal-size %s retire wall_median=%s journal_list wall_median=%s quiet_tenant_journal_list wall_median=%s (runs=%d, interleaved)",
			b.label, ms(median(b.retire)), ms(median(b.list)), ms(median(b.quietList)), runs)
	}
	ratio := func(f func(*journalSizeBench) []time.Duration) float64 {
		return float64(median(f(huge))) / float64(median(f(small)))
	}
	suite.BenchLine("journal-size ratio %s/ops=1000: retire=%.2f journal_list=%.2f quiet_tenant_journal_list=%.2f (goal: each at most 1.2)", huge.label,
		ratio(func(b *journalSizeBench) []time.Duration { return b.retire }),
		ratio(func(b *journalSizeBench) []time.Duration { return b.list }),
		ratio(func(b *journalSizeBench) []time.Duration { return b.quietList }))

	// The plans, as the namespace roles (row-level security applies), and
	// the shared buffers each touches (deterministic, unlike wall time).
	sql := store.ReaderSQL()
	buffers := map[string][]string{}
	var names []string
	for _, b := range []*journalSizeBench{small, huge} {
		mutation := fmt.Sprintf("mut-size-%d-%d", b.ops, runs-1)
		conn, quietConn := suite.Connect(t, b.journal.OperatorURL), suite.Connect(t, b.quietURL)
		var opID int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT id FROM keyledger.operations WHERE mutation_id = $1`, mutation).Scan(&opID))
		names = names[:0]
		for _, q := range []struct {
			name, sql string
			conn      *pgx.Conn
			args      []any
			setting   string
		}{
			{"list", sql["list"], conn, []any{50}, ""},
			{"list-namespace-page", store.NamespacePageSQL, conn, []any{e.NS, 50}, store.NamespacePageSetting},
			{"quiet-tenant-list", sql["list"], quietConn, []any{50}, ""},
			{"quiet-tenant-list-before-migration-8", listQueryBefore8, quietConn, []any{50}, ""},
			{"quiet-tenant-namespace-page", store.NamespacePageSQL, quietConn, []any{quietNamespace, 50}, store.NamespacePageSetting},
			{"operation", sql["operation"], conn, []any{mutation, e.NS}, ""},
			{"records", sql["records"], conn, []any{opID}, ""},
		} {
			names = append(names, q.name)
			if q.setting != "" {
				// What keyledger.newest_in_namespace runs, as it runs it.
				_, err := q.conn.Exec(ctx, "SET "+q.setting)
				require.NoError(t, err)
			}
			suite.ExplainText(t, q.conn, q.sql, q.args...) // the session's first look at the catalog is not the query's
			plan := suite.ExplainText(t, q.conn, q.sql, q.args...)
			if q.setting != "" {
				_, err := q.conn.Exec(ctx, "RESET ALL")
				require.NoError(t, err)
			}
			top := "?"
			for _, line := range strings.Split(plan, "\n") {
				suite.BenchLine("journal-size plan %s %s | %s", b.label, q.name, line)
				if l := strings.TrimSpace(line); top == "?" && strings.HasPrefix(l, "Buffers:") {
					top = strings.TrimPrefix(l, "Buffers: ")
				}
			}
			buffers[q.name] = append(buffers[q.name], top)
		}
	}
	for _, n := range names {
		suite.BenchLine("journal-size buffers %s: ops=1000 %q, %s %q", n, buffers[n][0], huge.label, buffers[n][1])
	}
}
