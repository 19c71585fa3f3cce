package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
)

// The kustomizations under deploy/ that render on their own. The api-egress
// component is a template: it is rendered only through a private overlay
// (PrivateOverlay), as an operator would use it.
var kustomizations = []string{"base", "versioned", "control", "overlays/cloudnativepg", "overlays/cloudnativepg-versioned", "journal", "journal/grant", "journal/inspect", "credentials"}

// TestIntegrationDeployNameSuffixOfDigits: the private overlay as
// deploy/README.md writes it renders for a namespace named only with
// digits (a valid DNS label): its nameSuffix is quoted, since YAML reads
// -123456789012 as a number, which kustomize refuses. The random hex
// suffix of the deploy tests hit that about once in 300 runs.
func TestIntegrationDeployNameSuffixOfDigits(t *testing.T) {
	t.Parallel()
	objs := suite.RenderPrivate(t, suite.PrivateOverlay{
		Namespace: "123456789012", NameSuffix: "123456789012", SecretName: "keyring", Canary: "192.0.2.10:443",
		Command: []byte(`{"kind":"KeyRetirement"}`), APIServerIP: "10.0.0.1", APIServerPort: 6443,
	})
	for _, o := range objs {
		if o.GetKind() == "ClusterRoleBinding" {
			require.True(t, strings.HasSuffix(o.GetName(), "-123456789012"), o.GetName())
			return
		}
	}
	t.Fatal("no ClusterRoleBinding rendered")
}
