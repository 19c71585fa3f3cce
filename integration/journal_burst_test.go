package integration

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
)

// A platform-wide sync: 50 namespaces, each with its own journal role,
// start their credentials hook at once against one journal that accepts
// 30 sessions. A run PostgreSQL refuses a session exits 69 with the
// journal's reason (journal-too-many-connections: before anything durable;
// journal-timeout when the machine is too busy to answer within the
// connect timeout) or 75 after its preparation, never 1, and never hangs (each run is
// bounded by the harness's timeout); the runs that failed are run again,
// as the hook Job's podFailurePolicy retries 69 and 75, and within a few
// rounds every namespace's plan has completed.
func TestIntegrationJournalBurstOfNamespaces(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := e.BurstTenants(50)
	j.LimitConnections(t, 30)

	b := e.Converge(j.Tenants, 6)
	t.Logf("refusals by exit code and reason: %v", b.Refusals)
	requireRefusedSessions(t, b)
	e.RequireCreated(j.Tenants)
}

// requireRefusedSessions checks that every run of a burst that did not
// complete met a session refused (journal-too-many-connections) or not
// answered within the connect timeout (journal-timeout): the only
// failures a burst may meet.
func requireRefusedSessions(t *testing.T, b suite.Burst) {
	t.Helper()
	for _, k := range b.RefusalKinds() {
		require.Contains(t, []string{"69 journal-too-many-connections", "75 journal-too-many-connections", "69 journal-timeout", "75 journal-timeout"}, k,
			"a refused or unanswered session is the only failure a burst may meet")
	}
}

// The same burst through a session pooler sized as deploy/README.md says
// (PgBouncer, session mode, a pool of four server sessions per role, since
// each namespace's role has a pool of its own, and max_db_connections 25,
// below the journal's 30): past 25 sessions a client waits in the pooler,
// which closes another role's idle session to make room. Every run exits
// 0, 69 or 75, never 1, and the retried runs converge. (Without
// max_db_connections the pooler keeps the sessions of the roles that got
// in idle, up to server_idle_timeout, and the other namespaces' runs are
// refused round after round: docs/bench.md.)
func TestIntegrationJournalBurstThroughSessionPooler(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if err := platform.PgBouncerInstalled(); err != nil {
		t.Skip(err.Error())
	}
	j := e.BurstTenants(50)
	j.LimitConnections(t, 30)
	j.ThroughPooler(t, 4, 25)

	b := e.Converge(j.Tenants, 6)
	t.Logf("rounds %d, refusals by exit code and reason: %v", b.Rounds, b.Refusals)
	requireRefusedSessions(t, b)
	e.RequireCreated(j.Tenants)
}

// A session pooler sized without max_db_connections (four server
// sessions per role, no cap) in front of the same journal: the roles whose
// runs got a session in the first round keep it idle in their pools
// (server_idle_timeout, ten minutes by default), so the other namespaces'
// runs meet the journal's limit again in every round and the burst does
// not converge. Each of those runs still exits 69 or 75, never 1, with a
// reason that says the pooler had no server session for it
// (journal-pooler-no-server, not a broken protocol: PgBouncer sends its
// refusal as 08P01) or that none came in time. This is why
// deploy/README.md says to set max_db_connections.
func TestIntegrationJournalBurstThroughUncappedPoolerStarves(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if err := platform.PgBouncerInstalled(); err != nil {
		t.Skip(err.Error())
	}
	j := e.BurstTenants(50)
	j.LimitConnections(t, 30)
	j.ThroughPooler(t, 4, 0)

	b := e.Rounds(j.Tenants, 3)
	t.Logf("refusals by exit code and reason: %v", b.Refusals)
	require.Contains(t, b.Refusals, "69 journal-pooler-no-server", "PgBouncer's refusal is named as the pooler's")
	for _, k := range b.RefusalKinds() {
		require.Contains(t, []string{"69 journal-pooler-no-server", "75 journal-pooler-no-server", "69 journal-timeout", "75 journal-timeout"}, k)
	}
	require.NotEmpty(t, b.Left, "the namespaces refused in the first round are refused in every round")
	var third int
	for _, r := range b.Runs {
		if r.Round == 3 {
			third++
			require.NotZero(t, r.Code, "a namespace refused twice is refused a third time")
		}
	}
	require.Equal(t, len(b.Left), third)
	var completed []*suite.BurstTenant
	for _, tn := range j.Tenants {
		if !slices.Contains(b.Left, tn) {
			completed = append(completed, tn)
		}
	}
	e.RequireCreated(completed)
}
