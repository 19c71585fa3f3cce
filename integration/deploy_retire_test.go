package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// identityKinds are the rendered objects applied for real: the Job's
// identity and every right it is given.
var identityKinds = []string{"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}

// deployedOverlay renders a private overlay for s, as deploy/README.md tells
// an operator to, with a unique name suffix (the cluster-scoped binding must
// not collide with other tests').
func deployedOverlay(e *env, secretName string, command map[string]any) []*unstructured.Unstructured {
	e.T.Helper()
	cmd, err := json.Marshal(command)
	require.NoError(e.T, err)
	u, err := url.Parse(e.Kube.Host())
	require.NoError(e.T, err)
	host, port, err := net.SplitHostPort(u.Host)
	require.NoError(e.T, err)
	p, err := strconv.Atoi(port)
	require.NoError(e.T, err)
	return suite.RenderPrivate(e.T, suite.PrivateOverlay{
		Namespace: e.NS, NameSuffix: suite.RandomSuffix(e.T), SecretName: secretName, Canary: "127.0.0.1:9",
		Command: cmd, APIServerIP: host, APIServerPort: p,
	})
}

// applyIdentity applies the rendered ServiceAccount, Role, ClusterRole and
// bindings for real (server-side apply), removes the cluster-scoped ones
// when the test ends, mints a TokenRequest token for the ServiceAccount
// with a 600 s expiry and returns a kubeconfig that runs as it.
func applyIdentity(e *env, a *suite.Applier, objs []*unstructured.Unstructured) string {
	e.T.Helper()
	var sa string
	for _, obj := range objs {
		if !containsString(identityKinds, obj.GetKind()) {
			continue
		}
		applied, err := a.Apply(e.T.Context(), obj.DeepCopy(), e.NS, false)
		require.NoError(e.T, err, "applying %s %s", obj.GetKind(), obj.GetName())
		require.Equal(e.T, obj.GetName(), applied.GetName())
		if applied.GetNamespace() == "" {
			ri, err := a.Resource(obj.DeepCopy(), e.NS)
			require.NoError(e.T, err)
			name := applied.GetName()
			e.T.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := ri.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					e.T.Errorf("deleting %s: %v", name, err)
				}
			})
		}
		if obj.GetKind() == "ServiceAccount" {
			require.Empty(e.T, sa, "one ServiceAccount")
			sa = obj.GetName()
		}
	}
	require.NotEmpty(e.T, sa)
	cfg, err := e.Kube.ServiceAccountConfig(e.T.Context(), e.NS, sa, 600)
	require.NoError(e.T, err)
	path, err := e.Kube.KubeconfigForConfig(cfg, e.T.TempDir())
	require.NoError(e.T, err)
	return path
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// commandFrom writes the command the rendered Job would mount (the command
// ConfigMap's command.json) to a file, and returns its absolute path.
func commandFrom(e *env, objs []*unstructured.Unstructured) string {
	e.T.Helper()
	cm := suite.Find(e.T, objs, "ConfigMap", suite.CommandConfigMapPrefix)
	data, ok, err := unstructured.NestedString(cm.Object, "data", "command.json")
	require.NoError(e.T, err)
	require.True(e.T, ok, "the command ConfigMap holds command.json")
	path := filepath.Join(e.T.TempDir(), "command.json")
	require.NoError(e.T, os.WriteFile(path, []byte(data), 0o400))
	return path
}

// The identity the deployment renders, and nothing else, retires a key: its
// token (TokenRequest, 600 s) passes the permission matrix, and the command
// read from the rendered ConfigMap completes.
func TestIntegrationDeployRetire(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.Applier()
	before := suite.StandardKeyring()
	s := e.CreateSecret(suite.KeyringSecret("prompt-output-keyring", before))
	objs := deployedOverlay(e, s.Name, suite.RetireCommand(s, "k-2026-07", "mut-deploy"))
	require.Empty(t, suite.Audit(objs), "the deployed overlay passes the audit")
	kubeconfig := applyIdentity(e, a, objs)

	r := e.Keyledger([]string{"run", commandFrom(e, objs)}, suite.AsKubeconfig(kubeconfig))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "completed", suite.Outcome(t, r)["outcome"])
	after := e.GetSecret(s.Name)
	suite.RequireRetired(t, after, "k-2026-07", "mut-deploy", before)
	require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, after.ResourceVersion))
	op, _ := e.JournalOf("mut-deploy")
	require.Equal(t, store.StateCompleted, op.State)
}

// Widening the rendered Role in any of three ways makes the run refuse with
// 77 before PostgreSQL is contacted. A second Secret name is found by the
// rules review, whatever the name (the access reviews probe only one).
func TestIntegrationDeployRoleMutationsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.Applier()
	cases := []struct {
		name     string
		mutate   func(rule map[string]any)
		mismatch string // the check the matrix reports, %s = the keyring's name
	}{
		{"add-list", func(r map[string]any) { r["verbs"] = append(r["verbs"].([]any), "list") }, "list secrets/%s in %s (want denied): allowed"},
		{"drop-resource-names", func(r map[string]any) { delete(r, "resourceNames") }, "secrets (any name) in %[2]s is granted"},
		{"second-secret-name", func(r map[string]any) {
			r["resourceNames"] = append(r["resourceNames"].([]any), "orders-db-password")
		}, "secrets/orders-db-password in %[2]s is granted"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := suite.StandardKeyring()
			s := e.CreateSecret(suite.KeyringSecret("keyring-"+strconv.Itoa(i), before))
			mutation := "mut-deploy-" + tc.name
			objs := deployedOverlay(e, s.Name, suite.RetireCommand(s, "k-2026-07", mutation))
			role := suite.Find(t, objs, "Role", "keyledger-retire")
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			tc.mutate(rules[0].(map[string]any))
			require.NoError(t, unstructured.SetNestedSlice(role.Object, rules, "rules"))
			kubeconfig := applyIdentity(e, a, objs)

			pgURL, connections := suite.PGListener(t)
			r := e.Keyledger([]string{"run", commandFrom(e, objs)}, suite.AsKubeconfig(kubeconfig), suite.WithDatabase(pgURL))
			require.Equal(t, 77, r.Code, "%s %s", r.Stdout, r.Stderr)
			out := suite.Outcome(t, r)
			require.Equal(t, "permission-mismatch", out["reason"])
			// mismatch: %[1]s is the keyring's name, %[2]s the namespace.
			require.Contains(t, out["error"], fmt.Sprintf(tc.mismatch, s.Name, e.NS), "the widening itself is what was found")
			require.Zero(t, connections.Load(), "PostgreSQL is never contacted")
			require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion)
		})
	}
}
