package integration

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// More Secrets than versioned.MaxHistoryClaims claiming the live UID: the
// update is refused (exit 2, history-too-large, the count in its summary)
// before anything is written, and `history` is refused the same way; below
// the cap both go on.
func TestIntegrationVersionedHistoryCap(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("capped")
	live := e.CreateSecret(suite.PlainSecret("capped", map[string][]byte{"password": []byte("v0")}))
	e.SeedSecrets("claims", versioned.MaxHistoryClaims+1, func(int) map[string]string {
		return map[string]string{versioned.AnnotationSourceUID: string(live.UID)}
	})

	r := e.RunCmd(suite.UpdateCommand(e.NS, "capped", live.ResourceVersion, "mut-capped", map[string][]byte{"password": []byte("v1")}), as)
	out := suite.RequireRefused(t, r, versioned.ReasonHistoryTooLarge)
	require.EqualValues(t, versioned.MaxHistoryClaims+1, out["historyClaims"], "stdout %s", r.Stdout)
	require.EqualValues(t, versioned.MaxHistoryClaims, out["maxHistoryClaims"])
	require.Equal(t, live.ResourceVersion, e.GetSecret("capped").ResourceVersion, "nothing written")
	require.Empty(t, e.VersionsOf(live.UID), "no snapshot taken")

	h := e.Keyledger([]string{"history", e.NS + "/capped"}, as)
	require.Equal(t, 2, h.Code, "stdout %s stderr %s", h.Stdout, h.Stderr)
	require.Contains(t, h.Stderr, "[history-too-large, exit 2]")
	require.Contains(t, h.Stderr, fmt.Sprintf("%d Secrets in the namespace claim", versioned.MaxHistoryClaims+1))

	// Two fewer: 255 claimants, and the write's own snapshot makes 256.
	c := e.Kube.Client().CoreV1().Secrets(e.NS)
	for _, name := range []string{"claims-0000", "claims-0001"} {
		require.NoError(t, c.Delete(t.Context(), name, metav1.DeleteOptions{}))
	}
	r = e.RunCmd(suite.UpdateCommand(e.NS, "capped", live.ResourceVersion, "mut-capped-2", map[string][]byte{"password": []byte("v1")}), as)
	suite.RequireOK(t, r, "completed")
	require.Equal(t, []string{"1"}, e.VersionsOf(live.UID))
	h = e.Keyledger([]string{"history", e.NS + "/capped"}, as)
	require.Equal(t, 0, h.Code, h.Stderr)
}
