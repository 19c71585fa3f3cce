package integration

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/store"
)

// pooled starts a session pooler (PgBouncer) for the operator role in
// front of the test's server and returns this test's journal URL through
// it. One server session (PoolSize 1) makes every client after the first
// take the session the one before it used.
//
// Without pgbouncer installed the test is skipped, as the credential repair
// tests are without redis-server (hack/deps.sh installs both).
func (e *env) pooled(opts platform.PgBouncerOptions) string {
	e.t.Helper()
	if err := platform.PgBouncerInstalled(); err != nil {
		e.t.Skip(err.Error())
	}
	return e.startPooler(opts)
}

// pooledIfInstalled is pooled for a benchmark: without pgbouncer it
// prints why the pooled rows are missing and returns "".
func (e *env) pooledIfInstalled(row string, opts platform.PgBouncerOptions) string {
	e.t.Helper()
	if err := platform.PgBouncerInstalled(); err != nil {
		benchLine("%s-pooled skipped: %v", row, err)
		return ""
	}
	return e.startPooler(opts)
}

// startPooler starts the pooler and returns the journal's URL through it.
func (e *env) startPooler(opts platform.PgBouncerOptions) string {
	e.t.Helper()
	opts.Roles = []string{store.DefaultOperatorRole}
	if opts.PoolSize == 0 {
		opts.PoolSize = 1
	}
	b, err := platform.StartPgBouncer(e.t.Context(), shared.pg, opts)
	require.NoError(e.t, err)
	e.t.Cleanup(b.Stop)
	url, err := b.URL(e.journal.OperatorURL)
	require.NoError(e.t, err)
	return url
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
	url := e.pooled(platform.PgBouncerOptions{})

	for range 2 {
		requireDefaultTimeouts(t, url)
	}

	before := standardKeyring()
	s := e.createSecret(keyringSecret("keyring-pooled", before))
	path := e.writeCommand("pooled.json", retireCommand(s, "k-2026-07", "mut-pooled"))
	r := e.keyledger([]string{"run", path}, e.asRetirerOf(s), withDatabase(url))
	require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, "completed", outcome(t, r)["outcome"], r.Stdout)
	after := e.getSecret(s.Name)
	require.Equal(t, 1, e.secretWrites(s.Name, s.ResourceVersion, after.ResourceVersion))

	r = e.keyledger([]string{"run", path}, e.asRetirerOf(s), withDatabase(url))
	require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, after.ResourceVersion, e.getSecret(s.Name).ResourceVersion, "the replay writes nothing")
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
	url := e.pooled(platform.PgBouncerOptions{NoReset: true})

	leaver := connect(t, url)
	_, err := leaver.Exec(ctx, `SELECT pg_advisory_lock(1, 2)`)
	require.NoError(t, err)
	require.NoError(t, leaver.Close(ctx))

	before := standardKeyring()
	s := e.createSecret(keyringSecret("keyring-unreset", before))
	path := e.writeCommand("unreset.json", retireCommand(s, "k-2026-07", "mut-unreset"))
	r := e.keyledger([]string{"run", path}, e.asRetirerOf(s), withDatabase(url))
	require.Equal(t, 69, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stderr, "the journal's session is not fresh")
	require.Contains(t, r.Stderr, "server_reset_query = DISCARD ALL")
	require.Equal(t, s.ResourceVersion, e.getSecret(s.Name).ResourceVersion, "nothing was sent")

	var n int
	require.NoError(t, connect(t, e.journal.OperatorURL).QueryRow(ctx,
		`SELECT count(*) FROM keyledger.operations WHERE mutation_id = 'mut-unreset'`).Scan(&n))
	require.Zero(t, n, "nothing was journaled")
}
