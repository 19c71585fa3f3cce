package integration

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
)

// burstTenant is one namespace of a burst: its journal role's URL, its
// plan's command file and a kubeconfig holding exactly the plan's rights.
type burstTenant struct {
	ns, url, path string
	as            runOption
}

// burstTenants makes n namespaces, each with its own journal role granted
// that namespace alone in one fresh journal, and a one-Secret credential
// plan. It returns the journal's owner URL with them.
func (e *env) burstTenants(n int) (string, []*burstTenant) {
	e.t.Helper()
	ctx := e.t.Context()
	j, err := shared.pg.NewJournal(ctx, "kl_burst_"+randomSuffix(e.t))
	require.NoError(e.t, err)
	out := make([]*burstTenant, n)
	for i := range out {
		sub := *e
		sub.ns = e.kube.Namespace(e.t)
		role, pw := "kl_b_"+randomSuffix(e.t), randomSuffix(e.t)
		require.NoError(e.t, shared.pg.EnsureRole(ctx, role, pw))
		require.NoError(e.t, platform.Grant(ctx, j.OwnerURL, role, sub.ns))
		url, err := shared.pg.URLFor(j.OwnerURL, role, pw)
		require.NoError(e.t, err)
		plan := credentialPlan(sub.ns, fmt.Sprintf("mut-burst-%d", i), []planSecret{standardSecret("burst-app")})
		out[i] = &burstTenant{ns: sub.ns, url: url, path: e.writeCommand(fmt.Sprintf("burst-%d.json", i), plan), as: sub.asCredentialRunner(plan)}
	}
	return j.OwnerURL, out
}

// limitConnections caps the sessions PostgreSQL accepts for the journal's
// database at limit (SQLSTATE 53300 past it, as past max_connections).
func limitConnections(t *testing.T, ownerURL string, limit int) {
	t.Helper()
	admin, err := pgx.Connect(t.Context(), shared.pg.AdminURL())
	require.NoError(t, err)
	defer admin.Close(context.WithoutCancel(t.Context()))
	_, err = admin.Exec(t.Context(), fmt.Sprintf("ALTER DATABASE %s CONNECTION LIMIT %d", pgx.Identifier{dbName(t, ownerURL)}.Sanitize(), limit))
	require.NoError(t, err)
}

// burstRound runs every tenant's plan at once and returns each exit code
// and reason, in tenant order.
func (e *env) burstRound(tenants []*burstTenant) []result {
	e.t.Helper()
	out := make([]result, len(tenants))
	var wg sync.WaitGroup
	for i, tn := range tenants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = e.keyledger([]string{"run", tn.path}, tn.as, withDatabase(tn.url))
		}()
	}
	wg.Wait()
	return out
}

// A platform-wide sync: 50 namespaces, each with its own journal role,
// start their credentials hook at once against one journal that accepts
// 30 sessions. A run PostgreSQL refuses a session exits 69 with the
// journal's reason (journal-too-many-connections: before anything durable)
// or 75 after its preparation, never 1, and never hangs (each run is
// bounded by the harness's timeout); the runs that failed are run again,
// as the hook Job's podFailurePolicy retries 69 and 75, and within a few
// rounds every namespace's plan has completed.
func TestIntegrationJournalBurstOfNamespaces(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const n, limit = 50, 30
	owner, tenants := e.burstTenants(n)
	limitConnections(t, owner, limit)

	pending := tenants
	reasons := map[string]int{}
	for round := 1; len(pending) > 0; round++ {
		require.LessOrEqual(t, round, 6, "every plan converges within six rounds; %d left: %v", len(pending), reasons)
		results := e.burstRound(pending)
		var again []*burstTenant
		for i, r := range results {
			switch r.Code {
			case 0:
				require.Equal(t, "completed", outcome(t, r)["outcome"], r.Stdout)
			case 69, 75:
				reasons[fmt.Sprint(r.Code, " ", outcome(t, r)["reason"])]++
				again = append(again, pending[i])
			default:
				t.Fatalf("round %d, %s: exit %d (only 0, 69 and 75 are a burst's): %s %s", round, pending[i].ns, r.Code, r.Stdout, r.Stderr)
			}
		}
		t.Logf("round %d: %d runs, %d to run again", round, len(pending), len(again))
		pending = again
	}
	var seen []string
	for k := range reasons {
		seen = append(seen, k)
	}
	sort.Strings(seen)
	t.Logf("refusals by exit code and reason: %v", reasons)
	for _, k := range seen {
		require.Contains(t, []string{"69 journal-too-many-connections", "75 journal-too-many-connections"}, k,
			"a refused session is the only failure a burst may meet")
	}
	// Each namespace's Secret exists once, created by its own plan.
	for _, tn := range tenants {
		sub := *e
		sub.ns = tn.ns
		s := sub.getSecret("burst-app")
		require.NotEmpty(t, s.Data["password"], tn.ns)
	}
}
