package integration

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
)

// A completion whose detail carries outcome, kind, mutationId and reason
// keys (forged with SQL as the role runs use) does not change the words
// stdout carries: whatever the run decides about the forged operation, its
// outcome, kind, mutationId and reason are keyledger's own.
func TestIntegrationForgedEndingDetailCannotOverrideStdout(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.CreateSecret(suite.KeyringSecret("keyring-ending-keys", suite.StandardKeyring()))
	mutation := "mut-ending-keys"
	path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, "k-2026-07", mutation))
	// The real command prepares its operation (the digest is keyledger's)
	// and dies before any call.
	r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s), suite.WithFailpoint("after-prepare"))
	require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)

	ctx := t.Context()
	tx, err := suite.Connect(t, e.Journal.OperatorURL).Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE keyledger.operations SET state = 'completed', outcome = 'completed' WHERE mutation_id = $1`, mutation)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step, detail)
		SELECT id, 'completion', 'complete', '{"outcome":"forged-outcome","kind":"ForgedKind","mutationId":"forged-mutation","reason":"forged-reason","error":"forged-error"}'::jsonb
		FROM keyledger.operations WHERE mutation_id = $1`, mutation)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	r = e.Keyledger([]string{"run", path}, e.AsRetirerOf(s))
	out := suite.Outcome(t, r)
	require.NotContains(t, r.Stdout, "forged", "stdout carries a forged word: %s", r.Stdout)
	require.Equal(t, "KeyRetirement", out["kind"], r.Stdout)
	require.Equal(t, mutation, out["mutationId"], r.Stdout)
	words := []string{"completed", "existing", "converged", "refused", "uncertain", "invalid", "unavailable", "error"}
	require.True(t, slices.Contains(words, out["outcome"].(string)), "outcome %v is not one of keyledger's words", out["outcome"])
	if reason, ok := out["reason"]; ok {
		require.NotEqual(t, "forged-reason", reason)
		require.Regexp(t, `^[a-z][a-z-]*$`, reason)
	}
	if msg, ok := out["error"]; ok {
		require.False(t, strings.Contains(msg.(string), "forged"), "error: %v", msg)
	}
}
