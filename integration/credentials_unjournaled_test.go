package integration

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
)

// A sync with nothing to write does not need the journal (issue 36). A
// plan converges with its journal; then the journal cannot be reached (a
// loopback port nothing listens on: an outage that ends by itself). The
// next sync reads the planned Secrets, finds them present and complete,
// and exits 0 saying the journal was not consulted and authorship not
// checked, writing nothing. A plan with a Secret absent needs a create,
// which needs its journal: exit 69 with the journal's reason, nothing
// written. A wrong password is not an outage: exit 69 as before, its
// reason naming it, however complete the Secrets.
func TestIntegrationCredentialsSyncWithoutJournal(t *testing.T) {
	t.Parallel()
	e := setup(t)
	plan := suite.CredentialPlan(e.NS, "mut-outage", []suite.PlanSecret{suite.StandardSecret("outage-a"), suite.StandardSecret("outage-b")})
	as := e.AsCredentialRunner(plan)
	path := e.WriteCommand("outage.json", plan)
	suite.RequireOK(t, e.Keyledger([]string{"run", path}, as), "completed")
	down := suite.WithDatabase("postgres://kl_outage@" + suite.ClosedPort(t) + "/journal?sslmode=disable&connect_timeout=5")

	from := e.SecretsRV()
	r := e.Keyledger([]string{"run", path}, as, down)
	out := suite.RequireOK(t, r, "existing")
	require.Equal(t, "not-consulted", out["journal"], r.Stdout)
	require.Equal(t, "not-checked", out["authorship"], r.Stdout)
	require.Contains(t, r.Stderr, "authorship not checked")
	require.Empty(t, e.SecretWritesSince(from), "nothing written")
	suite.RequireNoValues(t, r.Stdout+r.Stderr, e.SecretValues("outage-a", "outage-b"))

	// A Secret absent: the create needs the journal.
	require.NoError(t, e.Kube.Client().CoreV1().Secrets(e.NS).Delete(t.Context(), "outage-b", metav1.DeleteOptions{}))
	from = e.SecretsRV()
	r = e.Keyledger([]string{"run", path}, as, down)
	require.Equal(t, 69, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.NotEqual(t, "not-consulted", suite.Outcome(t, r)["journal"])
	require.Empty(t, e.SecretWritesSince(from), "nothing written without the journal")
	_, err := e.Kube.Client().CoreV1().Secrets(e.NS).Get(t.Context(), "outage-b", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "still absent: %v", err)

	// The journal back: the same sync creates it.
	suite.RequireOK(t, e.Keyledger([]string{"run", path}, as), "completed")

	// A wrong password is a misconfiguration, not an outage: it is named,
	// and nothing ends without the journal.
	u, err := url.Parse(e.Journal.OperatorURL)
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), "not-the-password")
	r = e.Keyledger([]string{"run", path}, as, suite.WithDatabase(u.String()))
	require.Equal(t, 69, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "journal-login-failed", suite.Outcome(t, r)["reason"], r.Stdout)
	require.NotContains(t, r.Stdout, "not-consulted")
}
