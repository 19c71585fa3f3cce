package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/keyledger/keyledger/integration/suite"
)

// Every kustomization builds with the kustomize Go API and every object it
// renders passes a server-side dry run on the real API server: schema,
// defaulting, validation and admission. The CloudNativePG Cluster is
// validated against CloudNativePG's own CRD.
func TestIntegrationDeployDryRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.Applier()
	e.InstallCNPGClusterCRD(a)
	// journal/ renders into the journal's own namespace: it exists before
	// the dry run, as a Namespace in the same apply would create it first.
	e.EnsureJournalNamespace(a)
	fsys := suite.DeployFS(t)
	for _, dir := range kustomizations {
		t.Run(strings.ReplaceAll(dir, "/", "-"), func(t *testing.T) {
			objs := suite.Render(t, fsys, "/deploy/"+dir)
			a.DryRunAll(t, objs, e.NS)
		})
	}
	// The CRD's schema really is enforced: the example declares one
	// served namespace's role as the issue asks (login, nothing more, never
	// bypassing row-level security), and a value outside the schema is
	// refused.
	t.Run("cnpg-cluster-schema-enforced", func(t *testing.T) {
		cluster := suite.Find(t, suite.Render(t, fsys, "/deploy/journal"), "Cluster", "keyledger-journal")
		require.Equal(t, suite.JournalNamespace, cluster.GetNamespace())
		roles, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "managed", "roles")
		require.Len(t, roles, 1)
		role := roles[0].(map[string]any)
		require.Equal(t, "keyledger_team_a", role["name"])
		require.Equal(t, true, role["login"])
		require.Equal(t, false, role["superuser"])
		require.Equal(t, false, role["createrole"])
		require.Equal(t, false, role["bypassrls"])
		require.Equal(t, map[string]any{"name": "keyledger-role-team-a"}, role["passwordSecret"])
		role["ensure"] = "perhaps"
		require.NoError(t, unstructured.SetNestedSlice(cluster.Object, roles, "spec", "managed", "roles"))
		_, err := a.Apply(t.Context(), cluster, e.NS, true)
		require.True(t, apierrors.IsInvalid(err), "want the CRD schema to refuse ensure=perhaps, got %v", err)
	})
	t.Run("private-overlay", func(t *testing.T) {
		objs := suite.RenderPrivate(t, suite.PrivateOverlay{
			Namespace: e.NS, NameSuffix: "dry", SecretName: "keyring", Canary: "192.0.2.10:443",
			Command: []byte(`{"kind":"KeyRetirement"}`), APIServerIP: "10.0.0.1", APIServerPort: 6443,
		})
		policy := suite.Find(t, objs, "NetworkPolicy", "keyledger-retire")
		egress, _, _ := unstructured.NestedSlice(policy.Object, "spec", "egress")
		require.Len(t, egress, 3, "DNS, the journal's primary and the API server endpoint")
		a.DryRunAll(t, objs, e.NS)
	})
	// The component is a template: built with its placeholders unfilled,
	// the API server refuses it, so it can never be applied by accident.
	t.Run("unfilled-api-egress-rejected", func(t *testing.T) {
		fsys := suite.DeployFS(t)
		require.NoError(t, fsys.WriteFile("/unfilled/kustomization.yaml", []byte(
			"resources:\n- ../deploy/base\ncomponents:\n- ../deploy/components/api-egress\n")))
		objs := suite.Render(t, fsys, "/unfilled")
		policy := suite.Find(t, objs, "NetworkPolicy", "keyledger-retire")
		_, err := a.Apply(t.Context(), policy.DeepCopy(), e.NS, true)
		require.Error(t, err)
		require.True(t, apierrors.IsInvalid(err), "want a validation error, got %v", err)
		require.Contains(t, err.Error(), "API_SERVER_IP/32")
	})
}

// No default kustomization references the api-egress component: API server
// egress is a deployer's decision, made in a private overlay.
func TestIntegrationDeployAPIEgressNotDefault(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	fsys := suite.DeployFS(t)
	for _, dir := range kustomizations {
		data, err := fsys.ReadFile("/deploy/" + dir + "/kustomization.yaml")
		require.NoError(t, err)
		require.NotContains(t, string(data), "api-egress", dir)
		for _, obj := range suite.Render(t, fsys, "/deploy/"+dir) {
			if obj.GetKind() != "NetworkPolicy" {
				continue
			}
			egress, _, _ := unstructured.NestedSlice(obj.Object, "spec", "egress")
			for _, rule := range egress {
				to, _, _ := unstructured.NestedSlice(rule.(map[string]any), "to")
				for _, peer := range to {
					require.NotContains(t, peer, "ipBlock", "%s: %s has an ipBlock rule by default", dir, obj.GetName())
				}
			}
		}
	}
}
