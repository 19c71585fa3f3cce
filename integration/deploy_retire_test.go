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

	"github.com/keyledger/keyledger/store"
)

// identityKinds are the rendered objects applied for real: the Job's
// identity and every right it is given.
var identityKinds = []string{"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}

// deployedOverlay renders a private overlay for s, as deploy/README.md tells
// an operator to, with a unique name suffix (the cluster-scoped binding must
// not collide with other tests').
func (e *env) deployedOverlay(secretName string, command map[string]any) []*unstructured.Unstructured {
	e.t.Helper()
	cmd, err := json.Marshal(command)
	require.NoError(e.t, err)
	u, err := url.Parse(e.kube.Host())
	require.NoError(e.t, err)
	host, port, err := net.SplitHostPort(u.Host)
	require.NoError(e.t, err)
	p, err := strconv.Atoi(port)
	require.NoError(e.t, err)
	return renderPrivate(e.t, privateOverlay{
		Namespace: e.ns, NameSuffix: randomSuffix(e.t), SecretName: secretName, Canary: "127.0.0.1:9",
		Command: cmd, APIServerIP: host, APIServerPort: p,
	})
}

// applyIdentity applies the rendered ServiceAccount, Role, ClusterRole and
// bindings for real (server-side apply), removes the cluster-scoped ones
// when the test ends, mints a TokenRequest token for the ServiceAccount
// with a 600 s expiry and returns a kubeconfig that runs as it.
func (e *env) applyIdentity(a *applier, objs []*unstructured.Unstructured) string {
	e.t.Helper()
	var sa string
	for _, obj := range objs {
		if !containsString(identityKinds, obj.GetKind()) {
			continue
		}
		applied, err := a.apply(e.t.Context(), obj.DeepCopy(), e.ns, false)
		require.NoError(e.t, err, "applying %s %s", obj.GetKind(), obj.GetName())
		require.Equal(e.t, obj.GetName(), applied.GetName())
		if applied.GetNamespace() == "" {
			ri, err := a.resource(obj.DeepCopy(), e.ns)
			require.NoError(e.t, err)
			name := applied.GetName()
			e.t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := ri.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					e.t.Errorf("deleting %s: %v", name, err)
				}
			})
		}
		if obj.GetKind() == "ServiceAccount" {
			require.Empty(e.t, sa, "one ServiceAccount")
			sa = obj.GetName()
		}
	}
	require.NotEmpty(e.t, sa)
	cfg, err := e.kube.ServiceAccountConfig(e.t.Context(), e.ns, sa, 600)
	require.NoError(e.t, err)
	path, err := e.kube.KubeconfigForConfig(cfg, e.t.TempDir())
	require.NoError(e.t, err)
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
func (e *env) commandFrom(objs []*unstructured.Unstructured) string {
	e.t.Helper()
	cm := find(e.t, objs, "ConfigMap", commandConfigMapPrefix)
	data, ok, err := unstructured.NestedString(cm.Object, "data", "command.json")
	require.NoError(e.t, err)
	require.True(e.t, ok, "the command ConfigMap holds command.json")
	path := filepath.Join(e.t.TempDir(), "command.json")
	require.NoError(e.t, os.WriteFile(path, []byte(data), 0o400))
	return path
}

// The identity the deployment renders, and nothing else, retires a key: its
// token (TokenRequest, 600 s) passes the permission matrix, and the command
// read from the rendered ConfigMap completes.
func TestIntegrationDeployRetire(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.applier()
	before := standardKeyring()
	s := e.createSecret(keyringSecret("prompt-output-keyring", before))
	objs := e.deployedOverlay(s.Name, retireCommand(s, "k-2026-07", "mut-deploy"))
	require.Empty(t, audit(objs), "the deployed overlay passes the audit")
	kubeconfig := e.applyIdentity(a, objs)

	r := e.keyledger([]string{"run", e.commandFrom(objs)}, asKubeconfig(kubeconfig))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "completed", outcome(t, r)["outcome"])
	after := e.getSecret(s.Name)
	requireRetired(t, after, "k-2026-07", "mut-deploy", before)
	require.Equal(t, 1, e.secretWrites(s.Name, s.ResourceVersion, after.ResourceVersion))
	op, _ := e.journalOf("mut-deploy")
	require.Equal(t, store.StateCompleted, op.State)
}

// Widening the rendered Role in any of three ways makes the run refuse with
// 77 before PostgreSQL is contacted. A second Secret name is found by the
// rules review, whatever the name (the access reviews probe only one).
func TestIntegrationDeployRoleMutationsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.applier()
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
			before := standardKeyring()
			s := e.createSecret(keyringSecret("keyring-"+strconv.Itoa(i), before))
			mutation := "mut-deploy-" + tc.name
			objs := e.deployedOverlay(s.Name, retireCommand(s, "k-2026-07", mutation))
			role := find(t, objs, "Role", "keyledger-retire")
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			tc.mutate(rules[0].(map[string]any))
			require.NoError(t, unstructured.SetNestedSlice(role.Object, rules, "rules"))
			kubeconfig := e.applyIdentity(a, objs)

			pgURL, connections := pgListener(t)
			r := e.keyledger([]string{"run", e.commandFrom(objs)}, asKubeconfig(kubeconfig), withDatabase(pgURL))
			require.Equal(t, 77, r.Code, "%s %s", r.Stdout, r.Stderr)
			out := outcome(t, r)
			require.Equal(t, "permission-mismatch", out["reason"])
			// mismatch: %[1]s is the keyring's name, %[2]s the namespace.
			require.Contains(t, out["error"], fmt.Sprintf(tc.mismatch, s.Name, e.ns), "the widening itself is what was found")
			require.Zero(t, connections.Load(), "PostgreSQL is never contacted")
			require.Equal(t, s.ResourceVersion, e.getSecret(s.Name).ResourceVersion)
		})
	}
}
