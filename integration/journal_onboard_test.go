package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
)

// `keyledger journal onboard` against an API server without the journal
// (no CloudNativePG, no Cluster keyledger-journal) and a namespace that
// does not exist: each refused with its reason and exit 64, nothing
// written, the owner's URL in no output. The dry run reads the same and
// is refused the same way. (Onboarding itself is proven on the test node
// with the real CloudNativePG: nodeOnboarding.)
func TestIntegrationJournalOnboardRefusals(t *testing.T) {
	e := setup(t)
	for _, c := range []struct {
		args   []string
		reason string
	}{
		{[]string{"journal", "onboard", "no-such-namespace-" + suite.RandomSuffix(t)}, "namespace-missing"},
		{[]string{"journal", "onboard", e.NS}, "journal-cluster-missing"},
		{[]string{"journal", "onboard", e.NS, "--dry-run"}, "journal-cluster-missing"},
		{[]string{"journal", "offboard", e.NS, "--dry-run"}, "journal-cluster-missing"},
		{[]string{"journal", "rotate", e.NS}, "not-onboarded"},
	} {
		r := e.Keyledger(c.args, suite.WithDatabase(e.Journal.OwnerURL))
		require.Equal(t, 64, r.Code, "%v: %s %s", c.args, r.Stdout, r.Stderr)
		require.Contains(t, r.Stderr, "["+c.reason+", exit 64]", "%v", c.args)
		require.NotContains(t, r.Stdout+r.Stderr, e.Journal.OwnerURL)
		require.NotContains(t, r.Stdout+r.Stderr, e.Kube.Host(), "no address in any output")
	}
	secrets, err := e.Kube.Client().CoreV1().Secrets(e.NS).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, s := range secrets.Items {
		require.False(t, strings.HasPrefix(s.Name, "keyledger-journal"), "nothing written: %s", s.Name)
	}
}
