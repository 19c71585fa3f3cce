package integration

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	plan := credentialPlan(e.ns, "mut-outage", []planSecret{standardSecret("outage-a"), standardSecret("outage-b")})
	as := e.asCredentialRunner(plan)
	path := e.writeCommand("outage.json", plan)
	requireOK(t, e.keyledger([]string{"run", path}, as), "completed")
	down := withDatabase("postgres://kl_outage@" + closedPort(t) + "/journal?sslmode=disable&connect_timeout=5")

	from := e.secretsRV()
	r := e.keyledger([]string{"run", path}, as, down)
	out := requireOK(t, r, "existing")
	require.Equal(t, "not-consulted", out["journal"], r.Stdout)
	require.Equal(t, "not-checked", out["authorship"], r.Stdout)
	require.Contains(t, r.Stderr, "authorship not checked")
	require.Empty(t, e.secretWritesSince(from), "nothing written")
	requireNoValues(t, r.Stdout+r.Stderr, e.secretValues("outage-a", "outage-b"))

	// A Secret absent: the create needs the journal.
	require.NoError(t, e.kube.Client().CoreV1().Secrets(e.ns).Delete(t.Context(), "outage-b", metav1.DeleteOptions{}))
	from = e.secretsRV()
	r = e.keyledger([]string{"run", path}, as, down)
	require.Equal(t, 69, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.NotEqual(t, "not-consulted", outcome(t, r)["journal"])
	require.Empty(t, e.secretWritesSince(from), "nothing written without the journal")
	_, err := e.kube.Client().CoreV1().Secrets(e.ns).Get(t.Context(), "outage-b", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "still absent: %v", err)

	// The journal back: the same sync creates it.
	requireOK(t, e.keyledger([]string{"run", path}, as), "completed")

	// A wrong password is a misconfiguration, not an outage: it is named,
	// and nothing ends without the journal.
	u, err := url.Parse(e.journal.OperatorURL)
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), "not-the-password")
	r = e.keyledger([]string{"run", path}, as, withDatabase(u.String()))
	require.Equal(t, 69, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "journal-login-failed", outcome(t, r)["reason"], r.Stdout)
	require.NotContains(t, r.Stdout, "not-consulted")
}
