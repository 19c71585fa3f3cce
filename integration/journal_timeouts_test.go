package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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

	requireDefaultTimeouts(t, e.journal.OperatorURL)

	before := standardKeyring()
	s := e.createSecret(keyringSecret("keyring-row-lock", before))
	mutation := "mut-row-lock"
	path := e.writeCommand(mutation+".json", retireCommand(s, "k-2026-07", mutation))
	r := e.keyledger([]string{"run", path}, e.asRetirerOf(s), withFailpoint("after-prepare"))
	require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)

	locker, err := connect(t, e.journal.OperatorURL).Begin(ctx)
	require.NoError(t, err)
	var id int64
	require.NoError(t, locker.QueryRow(ctx, `SELECT id FROM keyledger.operations WHERE mutation_id = $1 FOR UPDATE`, mutation).Scan(&id))

	// The documented default, then a setting of 1s: each run ends with its
	// exit code instead of waiting for the lock (the harness would kill a
	// hanging run after two minutes, failing the test).
	for _, opts := range [][]runOption{{e.asRetirerOf(s)}, {e.asRetirerOf(s), withEnv(store.EnvLockTimeout + "=1s")}} {
		start := time.Now()
		r = e.keyledger([]string{"run", path}, opts...)
		t.Logf("blocked run ended after %s", time.Since(start).Round(time.Millisecond))
		require.Equal(t, 75, r.Code, "%s %s", r.Stdout, r.Stderr)
		out := outcome(t, r)
		require.Equal(t, "uncertain", out["outcome"], r.Stdout)
		require.Contains(t, r.Stderr, "55P03", "the lock timeout (lock_not_available) ended it: %s", r.Stderr)
	}
	require.Equal(t, s.ResourceVersion, e.getSecret(s.Name).ResourceVersion, "nothing was sent while the row was locked")

	require.NoError(t, locker.Rollback(context.Background()))
	r = e.keyledger([]string{"run", path}, e.asRetirerOf(s))
	require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, "completed", outcome(t, r)["outcome"], r.Stdout)
	after := e.getSecret(s.Name)
	requireRetired(t, after, "k-2026-07", mutation, before)
	require.Equal(t, 1, e.secretWrites(s.Name, s.ResourceVersion, after.ResourceVersion), "one write")
	op, _ := e.journalOf(mutation)
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
