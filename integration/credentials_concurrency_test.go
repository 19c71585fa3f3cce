package integration

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// 32 runs of one credential plan at once, from nothing: the API server
// records exactly one write (its create) to each planned Secret and none
// to anything else, and the Secrets hold what the plan says. Every run
// exits 0 and none counted as a resume (a resume-run record): each joined
// the live run.
func TestIntegrationCredentialsOneWritePerSecretUnder32Runs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	secrets, names := suite.ConcurrentPlanSecrets(8)
	plan := suite.CredentialPlan(e.NS, "mut-thirty-two", secrets)
	path := e.WriteCommand("plan.json", plan)
	as := e.AsCredentialRunner(plan)
	from := e.SecretsRV()
	const n = 32
	results := e.RunTogether(n, []string{"run", path}, as)
	outcomes := map[string]int{}
	for i, r := range results {
		outcomes[suite.ConcurrentPlanOutcome(t, i, r)]++
	}
	t.Logf("outcomes of %d concurrent runs: %v", n, outcomes)
	for _, run := range e.RunsOf("mut-thirty-two") {
		_, records := e.JournalOf(run.MutationID)
		for _, r := range records {
			require.NotEqual(t, store.StepResumeRun, r.Step, "%s: a run arriving while another drove it counted as a resume", run.MutationID)
		}
	}
	writes := e.SecretWritesSince(from)
	want := map[string]int{}
	for _, name := range names {
		want[name] = 1
	}
	require.Equal(t, want, writes, "one write (the create) per planned Secret, nothing else written")
	for _, name := range names {
		s := e.GetSecret(name)
		require.Len(t, s.Data["password"], 32, name)
		require.Equal(t, "app", string(s.Data["username"]), name)
	}
}
