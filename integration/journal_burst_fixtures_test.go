package integration

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
)

// burstTenant is one namespace of a burst: its journal role and that
// role's URL, its plan's command file and a kubeconfig holding exactly the
// plan's rights.
type burstTenant struct {
	ns, role, url, path string
	as                  runOption
}

// burstJournal is the one journal a burst's namespaces share.
type burstJournal struct {
	ownerURL string
	tenants  []*burstTenant
}

// burstTenants makes n namespaces, each with its own journal role granted
// that namespace alone in one fresh journal, and a one-Secret credential
// plan each.
func (e *env) burstTenants(n int) *burstJournal {
	e.t.Helper()
	ctx := e.t.Context()
	j, err := shared.pg.NewJournal(ctx, "kl_burst_"+randomSuffix(e.t))
	require.NoError(e.t, err)
	out := &burstJournal{ownerURL: j.OwnerURL, tenants: make([]*burstTenant, n)}
	for i := range out.tenants {
		sub := *e
		sub.ns = e.kube.Namespace(e.t)
		role, pw := "kl_b_"+randomSuffix(e.t), randomSuffix(e.t)
		require.NoError(e.t, shared.pg.EnsureRole(ctx, role, pw))
		require.NoError(e.t, platform.Grant(ctx, j.OwnerURL, role, sub.ns))
		url, err := shared.pg.URLFor(j.OwnerURL, role, pw)
		require.NoError(e.t, err)
		plan := credentialPlan(sub.ns, fmt.Sprintf("mut-burst-%d", i), []planSecret{standardSecret("burst-app")})
		out.tenants[i] = &burstTenant{ns: sub.ns, role: role, url: url,
			path: e.writeCommand(fmt.Sprintf("burst-%s.json", sub.ns), plan), as: sub.asCredentialRunner(plan)}
	}
	return out
}

// limitConnections caps the sessions PostgreSQL accepts for the journal's
// database at limit (SQLSTATE 53300 past it, as past max_connections).
func (j *burstJournal) limitConnections(t *testing.T, limit int) {
	t.Helper()
	admin, err := pgx.Connect(t.Context(), shared.pg.AdminURL())
	require.NoError(t, err)
	defer admin.Close(context.WithoutCancel(t.Context()))
	_, err = admin.Exec(t.Context(), fmt.Sprintf("ALTER DATABASE %s CONNECTION LIMIT %d", pgx.Identifier{dbName(t, j.ownerURL)}.Sanitize(), limit))
	require.NoError(t, err)
}

// throughPooler starts a session pooler (PgBouncer) for every tenant's
// role and points each tenant's URL at it. A session pooler keeps a pool
// per database and role: poolSize server sessions per namespace, and
// maxDBConnections (0: no cap) over all of them.
func (j *burstJournal) throughPooler(t *testing.T, poolSize, maxDBConnections int) {
	t.Helper()
	roles := make([]string, len(j.tenants))
	for i, tn := range j.tenants {
		roles[i] = tn.role
	}
	b, err := platform.StartPgBouncer(t.Context(), shared.pg, platform.PgBouncerOptions{
		Roles: roles, PoolSize: poolSize, MaxDBConnections: maxDBConnections})
	require.NoError(t, err)
	t.Cleanup(b.Stop)
	for _, tn := range j.tenants {
		tn.url, err = b.URL(tn.url)
		require.NoError(t, err)
	}
}

// burstRun is one keyledger process of a burst.
type burstRun struct {
	result
	round int
	// wall is the process's own wall time; sinceBurst is the time from the
	// burst's first start to this process's exit.
	wall, sinceBurst time.Duration
}

// burst is how a burst converged: every process run, in rounds.
type burst struct {
	runs   []burstRun
	rounds int
	// took is the time from the first round's start to the last exit.
	took time.Duration
	// refusals counts the runs that exited 69 or 75, by "CODE reason".
	refusals map[string]int
	// left are the tenants whose plan had not completed when it stopped.
	left []*burstTenant
}

// converge runs every tenant's plan at once, then again, at once, the
// runs that exited 69 or 75 (as the hook Job's podFailurePolicy retries
// them), until every plan has completed; it fails the test if any is left
// after maxRounds.
func (e *env) converge(tenants []*burstTenant, maxRounds int, opts ...runOption) burst {
	e.t.Helper()
	b := e.rounds(tenants, maxRounds, opts...)
	require.Empty(e.t, b.left, "every plan converges within %d rounds; %d left: %v", maxRounds, len(b.left), b.refusals)
	return b
}

// rounds runs the tenants' plans in rounds as converge does, at most
// maxRounds, and returns how far they got. A run that exits with any code
// but 0, 69 or 75 fails the test: a burst's runs end 0, 69 or 75, and each
// is bounded by the harness's timeout (a hang fails too).
func (e *env) rounds(tenants []*burstTenant, maxRounds int, opts ...runOption) burst {
	e.t.Helper()
	b := burst{refusals: map[string]int{}, left: tenants}
	start := time.Now()
	for ; len(b.left) > 0 && b.rounds < maxRounds; b.rounds++ {
		var again []*burstTenant
		for i, r := range e.burstRound(b.left, start, opts...) {
			r.round = b.rounds + 1
			b.runs = append(b.runs, r)
			switch r.Code {
			case 0:
				require.Equal(e.t, "completed", outcome(e.t, r.result)["outcome"], r.Stdout)
			case 69, 75:
				b.refusals[fmt.Sprint(r.Code, " ", outcome(e.t, r.result)["reason"])]++
				again = append(again, b.left[i])
			default:
				e.t.Fatalf("round %d, %s: exit %d (only 0, 69 and 75 are a burst's): %s %s", r.round, b.left[i].ns, r.Code, r.Stdout, r.Stderr)
			}
		}
		e.t.Logf("round %d: %d runs, %d to run again", b.rounds+1, len(b.left), len(again))
		b.left = again
	}
	b.took = time.Since(start)
	return b
}

// burstRound starts every tenant's plan at the same moment and returns how
// each ended, in tenant order.
func (e *env) burstRound(tenants []*burstTenant, burstStart time.Time, opts ...runOption) []burstRun {
	e.t.Helper()
	out := make([]burstRun, len(tenants))
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i, tn := range tenants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			begin := time.Now()
			r := e.keyledger([]string{"run", tn.path}, append([]runOption{tn.as, withDatabase(tn.url)}, opts...)...)
			out[i] = burstRun{result: r, wall: time.Since(begin), sinceBurst: time.Since(burstStart)}
		}()
	}
	close(gate)
	wg.Wait()
	return out
}

// refusalKinds lists the refusals' "CODE reason" keys, sorted.
func (b burst) refusalKinds() []string {
	var out []string
	for k := range b.refusals {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// refused counts the runs that exited 69 or 75.
func (b burst) refused() int {
	n := 0
	for _, c := range b.refusals {
		n += c
	}
	return n
}

// requireCreated checks, from the API server, that each tenant's Secret
// exists with a generated password.
func (e *env) requireCreated(tenants []*burstTenant) {
	e.t.Helper()
	for _, tn := range tenants {
		sub := *e
		sub.ns = tn.ns
		require.NotEmpty(e.t, sub.getSecret("burst-app").Data["password"], tn.ns)
	}
}
