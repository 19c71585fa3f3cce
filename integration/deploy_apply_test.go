package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// installCNPGClusterCRD installs CloudNativePG's published Cluster CRD
// (testdata/cnpg, see NOTE.md there) and waits until it is served.
// Server-side apply makes it idempotent across tests.
func (e *env) installCNPGClusterCRD(a *applier) {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "cnpg", "postgresql.cnpg.io_clusters.yaml"))
	require.NoError(e.t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 64<<10)
	var crd *unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(e.t, err)
		}
		if len(m) > 0 {
			require.Nil(e.t, crd, "one CRD expected in the file")
			crd = &unstructured.Unstructured{Object: m}
		}
	}
	require.NotNil(e.t, crd)
	require.Equal(e.t, "CustomResourceDefinition", crd.GetKind())
	_, err = a.apply(e.t.Context(), crd, "", false)
	require.NoError(e.t, err, "installing the CloudNativePG Cluster CRD")
	ctx, cancel := context.WithTimeout(e.t.Context(), 60*time.Second)
	defer cancel()
	crds := a.dyn.Resource(crdResource)
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(e.t, err, "the Cluster CRD never became Established")
	require.NoError(e.t, a.waitForKind(e.t.Context(), "postgresql.cnpg.io", "v1", "Cluster"))
}

// Every kustomization builds with the kustomize Go API and every object it
// renders passes a server-side dry run on the real API server: schema,
// defaulting, validation and admission. The CloudNativePG Cluster is
// validated against CloudNativePG's own CRD.
func TestIntegrationDeployDryRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.applier()
	e.installCNPGClusterCRD(a)
	// journal/ renders into the journal's own namespace: it exists before
	// the dry run, as a Namespace in the same apply would create it first.
	e.ensureJournalNamespace(a)
	fsys := deployFS(t)
	for _, dir := range kustomizations {
		t.Run(strings.ReplaceAll(dir, "/", "-"), func(t *testing.T) {
			objs := render(t, fsys, "/deploy/"+dir)
			a.dryRunAll(t, objs, e.ns)
		})
	}
	// The CRD's schema really is enforced: the example declares one
	// served namespace's role as the issue asks (login, nothing more, never
	// bypassing row-level security), and a value outside the schema is
	// refused.
	t.Run("cnpg-cluster-schema-enforced", func(t *testing.T) {
		cluster := find(t, render(t, fsys, "/deploy/journal"), "Cluster", "keyledger-journal")
		require.Equal(t, journalNamespace, cluster.GetNamespace())
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
		_, err := a.apply(t.Context(), cluster, e.ns, true)
		require.True(t, apierrors.IsInvalid(err), "want the CRD schema to refuse ensure=perhaps, got %v", err)
	})
	t.Run("private-overlay", func(t *testing.T) {
		objs := renderPrivate(t, privateOverlay{
			Namespace: e.ns, NameSuffix: "dry", SecretName: "keyring", Canary: "192.0.2.10:443",
			Command: []byte(`{"kind":"KeyRetirement"}`), APIServerIP: "10.0.0.1", APIServerPort: 6443,
		})
		policy := find(t, objs, "NetworkPolicy", "keyledger-retire")
		egress, _, _ := unstructured.NestedSlice(policy.Object, "spec", "egress")
		require.Len(t, egress, 3, "DNS, the journal's primary and the API server endpoint")
		a.dryRunAll(t, objs, e.ns)
	})
	// The component is a template: built with its placeholders unfilled,
	// the API server refuses it, so it can never be applied by accident.
	t.Run("unfilled-api-egress-rejected", func(t *testing.T) {
		fsys := deployFS(t)
		require.NoError(t, fsys.WriteFile("/unfilled/kustomization.yaml", []byte(
			"resources:\n- ../deploy/base\ncomponents:\n- ../deploy/components/api-egress\n")))
		objs := render(t, fsys, "/unfilled")
		policy := find(t, objs, "NetworkPolicy", "keyledger-retire")
		_, err := a.apply(t.Context(), policy.DeepCopy(), e.ns, true)
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
	fsys := deployFS(t)
	for _, dir := range kustomizations {
		data, err := fsys.ReadFile("/deploy/" + dir + "/kustomization.yaml")
		require.NoError(t, err)
		require.NotContains(t, string(data), "api-egress", dir)
		for _, obj := range render(t, fsys, "/deploy/"+dir) {
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
