package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/migrations"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/command"
)

// BurstTenant is one namespace of a burst: its journal role and that
// role's URL, its plan's command file and a kubeconfig holding exactly the
// plan's rights.
type BurstTenant struct {
	NS, Role, URL, Path string
	As                  RunOption
}

// BurstJournal is the one journal a burst's namespaces share.
type BurstJournal struct {
	OwnerURL string
	Tenants  []*BurstTenant
}

// BurstTenants makes n namespaces, each with its own journal role granted
// that namespace alone in one fresh journal, and a one-Secret credential
// plan each.
func (e *Env) BurstTenants(n int) *BurstJournal {
	e.T.Helper()
	ctx := e.T.Context()
	j, err := shared.pg.NewJournal(ctx, "kl_burst_"+RandomSuffix(e.T))
	require.NoError(e.T, err)
	out := &BurstJournal{OwnerURL: j.OwnerURL, Tenants: make([]*BurstTenant, n)}
	for i := range out.Tenants {
		sub := *e
		sub.NS = e.Kube.Namespace(e.T)
		role, pw := "kl_b_"+RandomSuffix(e.T), RandomSuffix(e.T)
		require.NoError(e.T, shared.pg.EnsureRole(ctx, role, pw))
		require.NoError(e.T, platform.Grant(ctx, j.OwnerURL, role, sub.NS))
		url, err := shared.pg.URLFor(j.OwnerURL, role, pw)
		require.NoError(e.T, err)
		plan := CredentialPlan(sub.NS, fmt.Sprintf("mut-burst-%d", i), []PlanSecret{StandardSecret("burst-app")})
		out.Tenants[i] = &BurstTenant{NS: sub.NS, Role: role, URL: url,
			Path: e.WriteCommand(fmt.Sprintf("burst-%s.json", sub.NS), plan), As: sub.AsCredentialRunner(plan)}
	}
	return out
}

// LimitConnections caps the sessions PostgreSQL accepts for the journal's
// database at limit (SQLSTATE 53300 past it, as past max_connections).
func (j *BurstJournal) LimitConnections(t *testing.T, limit int) {
	t.Helper()
	admin, err := pgx.Connect(t.Context(), shared.pg.AdminURL())
	require.NoError(t, err)
	defer admin.Close(context.WithoutCancel(t.Context()))
	_, err = admin.Exec(t.Context(), fmt.Sprintf("ALTER DATABASE %s CONNECTION LIMIT %d", pgx.Identifier{DBName(t, j.OwnerURL)}.Sanitize(), limit))
	require.NoError(t, err)
}

// ThroughPooler starts a session pooler (PgBouncer) for every tenant's
// role and points each tenant's URL at it. A session pooler keeps a pool
// per database and role: poolSize server sessions per namespace, and
// maxDBConnections (0: no cap) over all of them.
func (j *BurstJournal) ThroughPooler(t *testing.T, poolSize, maxDBConnections int) {
	t.Helper()
	roles := make([]string, len(j.Tenants))
	for i, tn := range j.Tenants {
		roles[i] = tn.Role
	}
	b, err := platform.StartPgBouncer(t.Context(), shared.pg, platform.PgBouncerOptions{
		Roles: roles, PoolSize: poolSize, MaxDBConnections: maxDBConnections})
	require.NoError(t, err)
	t.Cleanup(b.Stop)
	for _, tn := range j.Tenants {
		tn.URL, err = b.URL(tn.URL)
		require.NoError(t, err)
	}
}

// BurstRun is one keyledger process of a burst.
type BurstRun struct {
	Result
	Round int
	// wall is the process's own wall time; sinceBurst is the time from the
	// burst's first start to this process's exit.
	Wall, SinceBurst time.Duration
}

// Burst is how a burst converged: every process run, in rounds.
type Burst struct {
	Runs   []BurstRun
	Rounds int
	// took is the time from the first round's start to the last exit.
	Took time.Duration
	// refusals counts the runs that exited 69 or 75, by "CODE reason".
	Refusals map[string]int
	// left are the tenants whose plan had not completed when it stopped.
	Left []*BurstTenant
}

// Converge runs every tenant's plan at once, then again, at once, the
// runs that exited 69 or 75 (as the hook Job's podFailurePolicy retries
// them), until every plan has completed; it fails the test if any is left
// after maxRounds.
func (e *Env) Converge(tenants []*BurstTenant, maxRounds int, opts ...RunOption) Burst {
	e.T.Helper()
	b := e.Rounds(tenants, maxRounds, opts...)
	require.Empty(e.T, b.Left, "every plan converges within %d rounds; %d left: %v", maxRounds, len(b.Left), b.Refusals)
	return b
}

// Rounds runs the tenants' plans in rounds as converge does, at most
// maxRounds, and returns how far they got. A run that exits with any code
// but 0, 69 or 75 fails the test: a burst's runs end 0, 69 or 75, and each
// is bounded by the harness's timeout (a hang fails too).
func (e *Env) Rounds(tenants []*BurstTenant, maxRounds int, opts ...RunOption) Burst {
	e.T.Helper()
	b := Burst{Refusals: map[string]int{}, Left: tenants}
	start := time.Now()
	for ; len(b.Left) > 0 && b.Rounds < maxRounds; b.Rounds++ {
		var again []*BurstTenant
		for i, r := range e.BurstRound(b.Left, start, opts...) {
			r.Round = b.Rounds + 1
			b.Runs = append(b.Runs, r)
			switch r.Code {
			case 0:
				require.Equal(e.T, "completed", Outcome(e.T, r.Result)["outcome"], r.Stdout)
			case 69, 75:
				b.Refusals[fmt.Sprint(r.Code, " ", Outcome(e.T, r.Result)["reason"])]++
				again = append(again, b.Left[i])
			default:
				e.T.Fatalf("round %d, %s: exit %d (only 0, 69 and 75 are a burst's): %s %s", r.Round, b.Left[i].NS, r.Code, r.Stdout, r.Stderr)
			}
		}
		e.T.Logf("round %d: %d runs, %d to run again", b.Rounds+1, len(b.Left), len(again))
		b.Left = again
	}
	b.Took = time.Since(start)
	return b
}

// BurstRound starts every tenant's plan at the same moment and returns how
// each ended, in tenant order.
func (e *Env) BurstRound(tenants []*BurstTenant, burstStart time.Time, opts ...RunOption) []BurstRun {
	e.T.Helper()
	out := make([]BurstRun, len(tenants))
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i, tn := range tenants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			begin := time.Now()
			r := e.Keyledger([]string{"run", tn.Path}, append([]RunOption{tn.As, WithDatabase(tn.URL)}, opts...)...)
			out[i] = BurstRun{Result: r, Wall: time.Since(begin), SinceBurst: time.Since(burstStart)}
		}()
	}
	close(gate)
	wg.Wait()
	return out
}

// RefusalKinds lists the refusals' "CODE reason" keys, sorted.
func (b Burst) RefusalKinds() []string {
	var out []string
	for k := range b.Refusals {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Refused counts the runs that exited 69 or 75.
func (b Burst) Refused() int {
	n := 0
	for _, c := range b.Refusals {
		n += c
	}
	return n
}

// RequireCreated checks, from the API server, that each tenant's Secret
// exists with a generated password.
func (e *Env) RequireCreated(tenants []*BurstTenant) {
	e.T.Helper()
	for _, tn := range tenants {
		sub := *e
		sub.NS = tn.NS
		require.NotEmpty(e.T, sub.GetSecret("burst-app").Data["password"], tn.NS)
	}
}

// ClosedPort is a loopback address where nothing listens.
func ClosedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// RoleStore opens the journal at url as its own process would (a pool and
// a session of its own); closing it ends its sessions.
func RoleStore(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// FreshDatabase creates an empty database (no journal) and returns its
// superuser URL.
func FreshDatabase(t *testing.T) string {
	t.Helper()
	url, err := shared.pg.CreateDatabase(t.Context(), "kl_"+RandomSuffix(t))
	require.NoError(t, err)
	return url
}

// LatestVersion is the newest embedded migration's version.
func LatestVersion(t *testing.T) uint {
	t.Helper()
	entries, err := fs.ReadDir(migrations.FS, ".")
	require.NoError(t, err)
	var v uint
	for _, e := range entries {
		var n uint
		if _, err := fmt.Sscanf(e.Name(), "%d_", &n); err == nil && n > v {
			v = n
		}
	}
	require.NotZero(t, v)
	return v
}

// MigrateStatus parses the one JSON line `keyledger migrate` prints.
func MigrateStatus(t *testing.T, r Result) store.MigrationStatus {
	t.Helper()
	var st store.MigrationStatus
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &st), "stdout %q stderr %q", r.Stdout, r.Stderr)
	return st
}

// PooledIfInstalled is pooled for a benchmark: without pgbouncer it
// prints why the pooled rows are missing and returns "".
func (e *Env) PooledIfInstalled(row string, opts platform.PgBouncerOptions) string {
	e.T.Helper()
	if err := platform.PgBouncerInstalled(); err != nil {
		BenchLine("%s-pooled skipped: %v", row, err)
		return ""
	}
	return e.StartPooler(opts)
}

// StartPooler starts the pooler and returns the journal's URL through it.
func (e *Env) StartPooler(opts platform.PgBouncerOptions) string {
	e.T.Helper()
	opts.Roles = []string{store.DefaultOperatorRole}
	if opts.PoolSize == 0 {
		opts.PoolSize = 1
	}
	b, err := platform.StartPgBouncer(e.T.Context(), shared.pg, opts)
	require.NoError(e.T, err)
	e.T.Cleanup(b.Stop)
	url, err := b.URL(e.Journal.OperatorURL)
	require.NoError(e.T, err)
	return url
}

// RunJournalURL is the journal connection the harness hands keyledger runs
// (KEYLEDGER_DATABASE_URL in env.keyledger): the forger below holds exactly
// what a run holds. It is one function so that when runs connect as their
// namespace's own role, the forgery does too.
func (e *Env) RunJournalURL() string { return e.Journal.OperatorURL }

// ForgeOperation is the attack of issues 18 and 35: with the run's own
// journal role and plain SQL (no keyledger code), it journals in one
// transaction the operation p, its preparation (the command digest a real
// run computes) and records in the shape a run journals them, left in
// state: calling (an interrupted run whose last call's answer was never
// recorded) or completed (then ending with a completion record).
func ForgeOperation(t *testing.T, url string, p store.PrepareParams, state store.State, records ...store.Record) {
	t.Helper()
	ctx := t.Context()
	conn := Connect(t, url)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var id int64
	require.NoError(t, tx.QueryRow(ctx, `
		INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name, expected_uid)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
		p.Kind, p.MutationID, p.RequestID, p.CommandDigest, p.Namespace, p.Name, p.ExpectedUID).Scan(&id))
	insert := func(r store.Record) {
		t.Helper()
		var attempt, batch *int
		if r.Kind == store.RecordAuthorityCall {
			attempt, batch = &r.Attempt, &r.Batch
		}
		_, err := tx.Exec(ctx, `
			INSERT INTO keyledger.records (operation_id, kind, step, target, attempt, uid, resource_version, digest, status, reason, batch, final, detail)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			id, string(r.Kind), r.Step, r.Target, attempt, r.UID, r.ResourceVersion, r.Digest, r.Status, r.Reason, batch, r.Final, r.Detail.JSON())
		require.NoError(t, err, "forging a %s record", r.Kind)
	}
	insert(store.Record{Kind: store.RecordPreparation, Step: "preparation", Digest: p.CommandDigest, UID: p.ExpectedUID, Detail: p.Detail})
	if state == store.StateCompleted {
		// Moved first: records of a finished operation are appended only
		// in the transaction that finished it.
		_, err = tx.Exec(ctx, `UPDATE keyledger.operations SET state = 'completed', outcome = 'completed' WHERE id = $1`, id)
		require.NoError(t, err)
		records = append(records, store.Record{Kind: store.RecordCompletion, Step: "complete", Status: "completed"})
	}
	for _, r := range records {
		insert(r)
	}
	if state != store.StateCompleted {
		_, err = tx.Exec(ctx, `UPDATE keyledger.operations SET state = $2 WHERE id = $1`, id, string(state))
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))
}

// ReadCommand reads a command file as `keyledger run` does.
func ReadCommand(t *testing.T, path string) *command.File {
	t.Helper()
	f, err := command.Read(path, command.ReadOptions{})
	require.NoError(t, err)
	return f
}

// RetentionJournal is a journal owned by a plain role (held to row-level
// security like any other) with one namespace role granted ToyNamespace.
type RetentionJournal struct {
	Owner, Role *store.Store
	OwnerConn   *pgx.Conn
	RoleConn    *pgx.Conn
	RoleURL     string
}

// RetentionJournal makes this test's journal an OwnedJournal and opens it
// as its owner and as a role granted ToyNamespace.
func (e *Env) RetentionJournal() *RetentionJournal {
	e.T.Helper()
	e.OwnedJournal()
	roleURL := e.NamespaceRole(ToyNamespace)
	open := func(url string) *store.Store {
		st, err := store.Open(e.T.Context(), url)
		require.NoError(e.T, err)
		e.T.Cleanup(st.Close)
		return st
	}
	return &RetentionJournal{Owner: open(e.Journal.OwnerURL), Role: open(roleURL),
		OwnerConn: Connect(e.T, e.Journal.OwnerURL), RoleConn: Connect(e.T, roleURL), RoleURL: roleURL}
}

// ExplainText is EXPLAIN (ANALYZE, BUFFERS) of query as conn's role.
func ExplainText(t *testing.T, conn *pgx.Conn, query string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(t.Context(), "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) "+query, args...)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// Connect opens a PostgreSQL connection closed when the test ends.
func Connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// OperatorStore opens the test's journal as the operator role, as a run does.
func (e *Env) OperatorStore() *store.Store {
	e.T.Helper()
	st, err := store.Open(e.T.Context(), e.Journal.OperatorURL)
	require.NoError(e.T, err)
	e.T.Cleanup(st.Close)
	return st
}

// ToyPreparation is a journal-only operation; n makes its command digest.
func ToyPreparation(mutation string, n int) store.PrepareParams {
	return store.PrepareParams{Kind: "ToyClaim", MutationID: mutation, RequestID: "req-" + mutation,
		CommandDigest: "sha256:" + fmt.Sprintf("%064d", n), Namespace: ToyNamespace, Name: "name"}
}

// MigrateDownTo runs `keyledger migrate down` (without the destroy flag)
// once per migration from the journal's version down to version to,
// requiring each to step exactly one version down: a test of one
// migration's down step names that step, not every migration added after.
func (e *Env) MigrateDownTo(to uint, opts ...RunOption) {
	e.T.Helper()
	from := MigrateStatus(e.T, e.Keyledger([]string{"migrate", "version"}, opts...)).Version
	require.Greater(e.T, from, to, "the journal is at version %d, not above %d", from, to)
	for v := from; v > to; v-- {
		r := e.Keyledger([]string{"migrate", "down"}, opts...)
		require.Equal(e.T, store.MigrationStatus{Version: v - 1, Changed: true}, MigrateStatus(e.T, r), "migrate down from %d", v)
	}
}
