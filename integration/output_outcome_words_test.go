package integration

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// Eight concurrent runs of one retirement, on the real API server and
// PostgreSQL: the API server's history (a watch from before the runs)
// holds one write, and the runs' words say who made it, as
// docs/outcomes.md defines them: exactly one completed (the run whose
// replace was answered applied), at most one converged (a run that ended
// the operation from a re-read of the other's write, and only when the
// journal's ending is its), every other existing. Before, all eight could
// say converged, the one that wrote included, and two could say
// completed.
func TestIntegrationConcurrentRetirementsSayWhoWrote(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := suite.StandardKeyring()
	s := e.CreateSecret(suite.KeyringSecret("keyring-eight", before))
	mutation := "mut-eight"
	path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, "k-2026-06", mutation))
	as := e.AsRetirerOf(s)

	const n = 8
	results := e.RunTogether(n, []string{"run", path}, as)

	words := map[string]int{}
	for i, r := range results {
		require.Equal(t, 0, r.Code, "run %d: %s %s", i, r.Stdout, r.Stderr)
		words[suite.Outcome(t, r)["outcome"].(string)]++
	}
	t.Logf("outcomes of %d concurrent runs: %v", n, words)
	after := e.GetSecret(s.Name)
	suite.RequireRetired(t, after, "k-2026-06", mutation, before)
	require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, after.ResourceVersion), "one write among %d runs", n)

	require.Equal(t, 1, words["completed"], "exactly the run whose write was applied says completed: %v", words)
	require.LessOrEqual(t, words["converged"], 1, "at most the run that ended the operation from a re-read: %v", words)
	require.Equal(t, n, words["completed"]+words["converged"]+words["existing"], "no other word: %v", words)
	op, records := e.JournalOf(mutation)
	require.Equal(t, store.StateCompleted, op.State)
	require.Equal(t, 1, suite.Count(records, store.RecordCompletion))
	if op.Outcome == "completed" {
		require.Zero(t, words["converged"], "the writer ended the operation itself: nobody converged")
	}
}
