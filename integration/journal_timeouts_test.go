package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// Another session holds the run's operation row (SELECT ... FOR UPDATE in
// an open transaction, as a concurrent run cut off mid-transaction would):
// the run does not wait for it beyond lock_timeout, it ends uncertain (exit
// 75) with nothing sent; once the lock is released, the same command
// converges, with one write. keyledger's sessions carry the three
// timeouts, as the server reports them to the role runs use.
func TestIntegrationJournalRowLockTimesOut(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()

	requireDefaultTimeouts(t, e.Journal.OperatorURL)

	before := suite.StandardKeyring()
	s := e.CreateSecret(suite.KeyringSecret("keyring-row-lock", before))
	mutation := "mut-row-lock"
	path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, "k-2026-07", mutation))
	r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s), suite.WithFailpoint("after-prepare"))
	require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)

	locker, err := suite.Connect(t, e.Journal.OperatorURL).Begin(ctx)
	require.NoError(t, err)
	var id int64
	require.NoError(t, locker.QueryRow(ctx, `SELECT id FROM keyledger.operations WHERE mutation_id = $1 FOR UPDATE`, mutation).Scan(&id))

	// The documented default, then a setting of 1s: each run ends with its
	// exit code instead of waiting for the lock (the harness would kill a
	// hanging run after two minutes, failing the test).
	for _, opts := range [][]suite.RunOption{{e.AsRetirerOf(s)}, {e.AsRetirerOf(s), suite.WithEnv(store.EnvLockTimeout + "=1s")}} {
		start := time.Now()
		r = e.Keyledger([]string{"run", path}, opts...)
		t.Logf("blocked run ended after %s", time.Since(start).Round(time.Millisecond))
		require.Equal(t, 75, r.Code, "%s %s", r.Stdout, r.Stderr)
		out := suite.Outcome(t, r)
		require.Equal(t, "uncertain", out["outcome"], r.Stdout)
		require.Contains(t, r.Stderr, "55P03", "the lock timeout (lock_not_available) ended it: %s", r.Stderr)
	}
	require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion, "nothing was sent while the row was locked")

	require.NoError(t, locker.Rollback(context.Background()))
	r = e.Keyledger([]string{"run", path}, e.AsRetirerOf(s))
	require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, "completed", suite.Outcome(t, r)["outcome"], r.Stdout)
	after := e.GetSecret(s.Name)
	suite.RequireRetired(t, after, "k-2026-07", mutation, before)
	require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, after.ResourceVersion), "one write")
	op, _ := e.JournalOf(mutation)
	require.Equal(t, store.StateCompleted, op.State)
}

// requireDefaultTimeouts opens a journal session at url, as a run does,
// and checks that the server reports the documented default timeouts for
// it.
func requireDefaultTimeouts(t *testing.T, url string) {
	t.Helper()
	st, err := store.Open(t.Context(), url)
	require.NoError(t, err)
	got, err := st.SessionTimeouts(t.Context())
	st.Close()
	require.NoError(t, err)
	require.Equal(t, store.DefaultSessionTimeouts, got, "the session is held to the documented default timeouts, as the server reports them")
}
