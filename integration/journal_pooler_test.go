package integration

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
)

// pooled starts a session pooler (PgBouncer) for the operator role in
// front of the test's server and returns this test's journal URL through
// it. One server session (PoolSize 1) makes every client after the first
// take the session the one before it used.
//
// Without pgbouncer installed the test is skipped, as the credential repair
// tests are without redis-server (hack/deps.sh installs both).
func pooled(e *env, opts platform.PgBouncerOptions) string {
	e.T.Helper()
	if err := platform.PgBouncerInstalled(); err != nil {
		e.T.Skip(err.Error())
	}
	return e.StartPooler(opts)
}

// Through a session pooler (PgBouncer, session mode, DISCARD ALL between
// clients, one server session reused by every client): a session carries
// keyledger's three timeouts (a pooler refuses them as startup
// parameters, so they are set in the session), and a retirement
// completes with one write and replays with none, each run on the session
// the run before it used.
func TestIntegrationJournalThroughSessionPooler(t *testing.T) {
	t.Parallel()
	e := setup(t)
	url := pooled(e, platform.PgBouncerOptions{})

	for range 2 {
		requireDefaultTimeouts(t, url)
	}

	before := suite.StandardKeyring()
	s := e.CreateSecret(suite.KeyringSecret("keyring-pooled", before))
	path := e.WriteCommand("pooled.json", suite.RetireCommand(s, "k-2026-07", "mut-pooled"))
	r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s), suite.WithDatabase(url))
	require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, "completed", suite.Outcome(t, r)["outcome"], r.Stdout)
	after := e.GetSecret(s.Name)
	require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, after.ResourceVersion))

	r = e.Keyledger([]string{"run", path}, e.AsRetirerOf(s), suite.WithDatabase(url))
	require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, after.ResourceVersion, e.GetSecret(s.Name).ResourceVersion, "the replay writes nothing")
}

// A pooler that hands a session on without resetting it (server_reset_query
// empty): the client before keyledger left an advisory lock in the session,
// and a run's live lock is a session advisory lock, which a session takes
// again as its own. The run refuses the session before it reads or writes
// anything: exit 69, the message names the cause and the fix, nothing is
// journaled and nothing is sent.
func TestIntegrationJournalPoolerWithoutResetIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	url := pooled(e, platform.PgBouncerOptions{NoReset: true})

	leaver := suite.Connect(t, url)
	_, err := leaver.Exec(ctx, `SELECT pg_advisory_lock(1, 2)`)
	require.NoError(t, err)
	require.NoError(t, leaver.Close(ctx))

	before := suite.StandardKeyring()
	s := e.CreateSecret(suite.KeyringSecret("keyring-unreset", before))
	path := e.WriteCommand("unreset.json", suite.RetireCommand(s, "k-2026-07", "mut-unreset"))
	r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s), suite.WithDatabase(url))
	require.Equal(t, 69, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stderr, "the journal's session is not fresh")
	require.Contains(t, r.Stderr, "server_reset_query = DISCARD ALL")
	require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion, "nothing was sent")

	var n int
	require.NoError(t, suite.Connect(t, e.Journal.OperatorURL).QueryRow(ctx,
		`SELECT count(*) FROM keyledger.operations WHERE mutation_id = 'mut-unreset'`).Scan(&n))
	require.Zero(t, n, "nothing was journaled")
}
