package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/cmd/keyledger/app"
	"github.com/keyledger/keyledger/integration/suite"
)

// The findings of the tenancy audit, one stable word each.
const (
	findingJournalSecretRead = "journal-secret-read"     // a Role of the journal's namespace reads Secrets
	findingClusterSecretRead = "cluster-secret-read"     // a ClusterRole reads Secrets (anywhere it is bound)
	findingForeignRoleRef    = "binding-to-foreign-role" // a binding to a role the deployment does not render
	findingRoleNoNamespace   = "role-without-namespace"  // a Role that lands wherever it is applied
)

// tenancyNamespaces are the three served namespaces of one deployment: a
// retirement, a versioned write and a credentials hook, each in its own.
type tenancyNamespaces struct{ Retire, Versioned, Hook string }

func (n tenancyNamespaces) all() []string { return []string{n.Retire, n.Versioned, n.Hook} }

// renderHookInProcess runs `keyledger render credentials` in this process
// and decodes its objects.
func renderHookInProcess(t *testing.T, plan map[string]any, args ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	b, err := json.Marshal(plan)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	var out, errOut bytes.Buffer
	err = app.Run(t.Context(), append([]string{"render", "credentials", "--plan", path, "--image", "keyledger:test"}, args...),
		app.IOStreams{Out: &out, ErrOut: &errOut})
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(out.String(), "\n---\n") {
		obj := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj.Object))
		objs = append(objs, obj)
	}
	return objs, nil
}

// tenancyDeployment is everything a deployment of one journal and three
// served namespaces renders: deploy/journal, a grant per namespace, a
// retirement overlay, a versioned-write overlay, the credentials fence and
// a rendered hook.
func tenancyDeployment(t *testing.T, n tenancyNamespaces, img suite.TenancyImage) []*unstructured.Unstructured {
	t.Helper()
	objs := suite.RenderJournal(t, img)
	for _, ns := range n.all() {
		objs = append(objs, suite.RenderGrant(t, ns, img)...)
	}
	objs = append(objs, suite.RenderPrivate(t, suite.PrivateOverlay{Namespace: n.Retire, NameSuffix: n.Retire, SecretName: "keyring",
		Canary: "192.0.2.10:443", Command: []byte(`{"kind":"KeyRetirement"}`), APIServerIP: "10.0.0.1", APIServerPort: 6443,
		ImageName: img.Name, ImageTag: img.Tag})...)
	fsys := suite.DeployFS(t)
	objs = append(objs, suite.Render(t, fsys, suite.WriteVersionedOverlay(t, fsys, suite.VersionedOverlay{Namespace: n.Versioned, NameSuffix: n.Versioned,
		LiveSecret: "shop-db", Canary: "192.0.2.10:443", Command: []byte(`{"kind":"SecretUpdate"}`),
		APIServerIP: "10.0.0.1", APIServerPort: 6443, ImageName: img.Name, ImageTag: img.Tag}))...)
	objs = append(objs, suite.RenderCredentialsFence(t, n.Hook, "10.0.0.1", 6443)...)
	hook, err := renderHookInProcess(t, suite.CredentialPlan(n.Hook, "mut-tenancy-hook", []suite.PlanSecret{suite.StandardSecret("shop-orders-cache-app")}))
	require.NoError(t, err)
	return append(objs, hook...)
}

// journalSecretReaders is the tenancy audit: no Role or ClusterRole of the
// deployment, in any namespace, may read (get, list, watch) a Secret of the
// journal's namespace. A Role grants only in its own namespace, so a Role
// elsewhere cannot; a Role in the journal's namespace must not read Secrets;
// a ClusterRole must not read Secrets at all (bound by a ClusterRoleBinding
// it reads them everywhere, by a RoleBinding in the journal's namespace
// there); a binding to a role the deployment does not render (admin, edit,
// another team's) cannot be judged and is a finding too.
func journalSecretReaders(objs []*unstructured.Unstructured, journalNS string) []string {
	a := &suite.Auditor{}
	rendered := map[string]bool{} // "Role/ns/name", "ClusterRole/name"
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Role":
			rendered["Role/"+obj.GetNamespace()+"/"+obj.GetName()] = true
		case "ClusterRole":
			rendered["ClusterRole/"+obj.GetName()] = true
		}
	}
	for _, obj := range objs {
		where := obj.GetKind() + "/" + obj.GetNamespace() + "/" + obj.GetName()
		switch obj.GetKind() {
		case "Role", "ClusterRole":
			var r rbacv1.Role // ClusterRole's rules decode the same way
			a.Convert(obj, &r)
			if obj.GetKind() == "Role" && obj.GetNamespace() == "" {
				a.Add(findingRoleNoNamespace, where)
			}
			for i, rule := range r.Rules {
				if !readsSecrets(rule) {
					continue
				}
				switch {
				case obj.GetKind() == "ClusterRole":
					a.Add(findingClusterSecretRead, fmt.Sprintf("%s rule %d", where, i))
				case obj.GetNamespace() == journalNS:
					a.Add(findingJournalSecretRead, fmt.Sprintf("%s rule %d", where, i))
				}
			}
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.RoleBinding // ClusterRoleBinding decodes the same way
			a.Convert(obj, &b)
			key := "ClusterRole/" + b.RoleRef.Name
			if b.RoleRef.Kind == "Role" {
				key = "Role/" + obj.GetNamespace() + "/" + b.RoleRef.Name
			}
			if !rendered[key] {
				a.Add(findingForeignRoleRef, where, key)
			}
		}
	}
	return a.Findings
}

// readsSecrets: the rule allows get, list or watch on core Secrets.
func readsSecrets(r rbacv1.PolicyRule) bool {
	anyOf := func(list []string, want ...string) bool {
		return slices.ContainsFunc(list, func(v string) bool { return v == "*" || slices.Contains(want, v) })
	}
	return anyOf(r.APIGroups, "") && anyOf(r.Resources, "secrets") && anyOf(r.Verbs, "get", "list", "watch")
}

// The deployment of one journal and three served namespaces, statically:
// no keyledger Role or ClusterRole can read a Secret of the journal's
// namespace, the journal's namespace holds no Role at all, and each served
// namespace's Role does read its own Secrets (so the audit reads real
// rules). The audit can fail: a Role moved into the journal's namespace, a
// ClusterRole that lists Secrets, and a binding to a role not rendered
// here are each caught; render credentials refuses a plan in the journal's
// namespace.
func TestIntegrationDeployTenancyAudit(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	n := tenancyNamespaces{Retire: "team-a", Versioned: "team-b", Hook: "team-c"}
	objs := tenancyDeployment(t, n, suite.TenancyImage{Name: "keyledger", Tag: "test"})
	require.Empty(t, journalSecretReaders(objs, suite.JournalNamespace))
	readers := map[string]bool{}
	for _, obj := range objs {
		if obj.GetKind() == "Role" {
			require.NotEqual(t, suite.JournalNamespace, obj.GetNamespace(), "no Role in the journal's namespace: %s", obj.GetName())
			var r rbacv1.Role
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &r))
			if slices.ContainsFunc(r.Rules, readsSecrets) {
				readers[obj.GetNamespace()] = true
			}
		}
		if obj.GetKind() == "ServiceAccount" && obj.GetNamespace() == suite.JournalNamespace {
			require.Equal(t, "keyledger-schema-owner", obj.GetName(), "the one identity of the journal's namespace")
		}
	}
	require.Equal(t, map[string]bool{n.Retire: true, n.Versioned: true, n.Hook: true}, readers,
		"each served namespace's Role reads Secrets of its own namespace")

	clone := func() []*unstructured.Unstructured {
		out := make([]*unstructured.Unstructured, len(objs))
		for i, o := range objs {
			out[i] = o.DeepCopy()
		}
		return out
	}
	mutations := []struct {
		name    string
		mutate  func(objs []*unstructured.Unstructured) []*unstructured.Unstructured
		finding string
	}{
		{"versioned-role-in-journal-namespace", func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
			for _, o := range objs {
				if o.GetKind() == "Role" || o.GetKind() == "RoleBinding" {
					if strings.HasPrefix(o.GetName(), "keyledger-versioned") {
						o.SetNamespace(suite.JournalNamespace)
					}
				}
			}
			return objs
		}, findingJournalSecretRead},
		{"cluster-role-lists-secrets", func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
			cr := suite.Find(t, objs, "ClusterRole", "keyledger-access-review")
			rules, _, _ := unstructured.NestedSlice(cr.Object, "rules")
			rules = append(rules, map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"list"}})
			require.NoError(t, unstructured.SetNestedSlice(cr.Object, rules, "rules"))
			return objs
		}, findingClusterSecretRead},
		{"cluster-role-wildcard", func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
			cr := suite.Find(t, objs, "ClusterRole", "keyledger-versioned-access-review")
			require.NoError(t, unstructured.SetNestedSlice(cr.Object, []any{map[string]any{"apiGroups": []any{"*"}, "resources": []any{"*"}, "verbs": []any{"*"}}}, "rules"))
			return objs
		}, findingClusterSecretRead},
		{"schema-owner-bound-to-admin", func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
			b := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
				"metadata": map[string]any{"name": "keyledger-schema-owner", "namespace": suite.JournalNamespace},
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
				"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "keyledger-schema-owner", "namespace": suite.JournalNamespace}}}}
			return append(objs, b)
		}, findingForeignRoleRef},
		{"role-without-namespace", func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
			suite.Find(t, objs, "Role", "keyledger-retire").SetNamespace("")
			return objs
		}, findingRoleNoNamespace},
	}
	for _, tc := range mutations {
		t.Run(tc.name, func(t *testing.T) {
			findings := journalSecretReaders(tc.mutate(clone()), suite.JournalNamespace)
			require.True(t, slices.ContainsFunc(findings, func(f string) bool { return strings.HasPrefix(f, tc.finding+":") }),
				"want %s among %v", tc.finding, findings)
		})
	}

	t.Run("hook-in-journal-namespace-refused", func(t *testing.T) {
		_, err := renderHookInProcess(t, suite.CredentialPlan(suite.JournalNamespace, "mut-journal-ns", []suite.PlanSecret{suite.StandardSecret("keyledger-journal-app")}))
		require.Equal(t, app.ExitUsage, app.ExitCode(err), "%v", err)
	})
}

// applyRBAC applies the identities and rights of objs for real, deleting
// the cluster-scoped ones when the test ends.
func applyRBAC(e *env, a *suite.Applier, objs []*unstructured.Unstructured) {
	e.T.Helper()
	for _, obj := range objs {
		switch obj.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
		default:
			continue
		}
		ri, err := a.Resource(obj.DeepCopy(), e.NS)
		require.NoError(e.T, err)
		_, err = a.Apply(e.T.Context(), obj.DeepCopy(), e.NS, false)
		require.NoError(e.T, err, "applying %s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
		if obj.GetNamespace() == "" || obj.GetNamespace() == suite.JournalNamespace {
			name := obj.GetName()
			e.T.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := ri.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					e.T.Errorf("deleting %s: %v", name, err)
				}
			})
		}
	}
}

// The same deployment on the real control plane: its ServiceAccounts,
// Roles, ClusterRoles and bindings applied in the journal's namespace and
// three served namespaces, each keyledger ServiceAccount is asked (a
// SubjectAccessReview) for get, list and watch on Secrets of the journal's
// namespace: denied, every one. The review can say yes: each served
// identity may read its own namespace's Secret, and a Role in the journal's
// namespace bound to one of them is seen at once.
func TestIntegrationDeployTenancyAccessReview(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.Applier()
	e.EnsureJournalNamespace(a)
	n := tenancyNamespaces{Retire: e.NS, Versioned: e.Kube.Namespace(t), Hook: e.Kube.Namespace(t)}
	objs := tenancyDeployment(t, n, suite.TenancyImage{Name: "keyledger", Tag: "test"})
	// The grant Jobs of other tests share the journal's namespace here:
	// this test's objects there are its own (named after its namespaces).
	applyRBAC(e, a, objs)
	ctx, c := t.Context(), e.Kube.Client()
	suite.RequireNoJournalSecretAccess(ctx, t, c, objs)

	// Positive controls: the reviews are not denying everything.
	require.True(t, suite.CanAccess(ctx, t, c, suite.ServiceAccountRef{Namespace: n.Retire, Name: "keyledger-retire-" + n.Retire}, "get", n.Retire, "keyring"))
	require.True(t, suite.CanAccess(ctx, t, c, suite.ServiceAccountRef{Namespace: n.Versioned, Name: "keyledger-versioned-" + n.Versioned}, "list", n.Versioned, ""))
	require.True(t, suite.CanAccess(ctx, t, c, suite.ServiceAccountRef{Namespace: n.Hook, Name: "shop-orders-cache-credentials"}, "get", n.Hook, "shop-orders-cache-app"))

	// A Role in the journal's namespace bound to the versioned identity is
	// seen by the same review.
	leak := suite.ServiceAccountRef{Namespace: n.Versioned, Name: "keyledger-versioned-" + n.Versioned}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "leak-" + n.Versioned, Namespace: suite.JournalNamespace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}}
	_, err := c.RbacV1().Roles(suite.JournalNamespace).Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: suite.JournalNamespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: leak.Name, Namespace: leak.Namespace}}}
	_, err = c.RbacV1().RoleBindings(suite.JournalNamespace).Create(ctx, binding, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		bg := context.Background()
		_ = c.RbacV1().RoleBindings(suite.JournalNamespace).Delete(bg, binding.Name, metav1.DeleteOptions{})
		_ = c.RbacV1().Roles(suite.JournalNamespace).Delete(bg, role.Name, metav1.DeleteOptions{})
	})
	require.Eventually(t, func() bool {
		return suite.CanAccess(ctx, t, c, leak, "get", suite.JournalNamespace, "keyledger-journal-app")
	},
		10*time.Second, 100*time.Millisecond, "the review sees a Role of the journal's namespace")
}

// The private journal overlay of deploy/README.md with a second served
// namespace's role added by the README's patch renders, and CloudNativePG's
// CRD accepts the Cluster with both roles (a server-side dry run).
func TestIntegrationDeployJournalRolePatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.Applier()
	e.InstallCNPGClusterCRD(a)
	e.EnsureJournalNamespace(a)
	fsys := suite.DeployFS(t)
	require.NoError(t, fsys.WriteFile("/my-journal/kustomization.yaml", []byte(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../deploy/journal
patches:
- target:
    kind: Cluster
    name: keyledger-journal
  patch: |-
    - op: add
      path: /spec/managed/roles/-
      value: {name: keyledger_team_b, ensure: present, login: true, superuser: false, createrole: false,
              createdb: false, replication: false, bypassrls: false, inherit: false,
              connectionLimit: 16, passwordSecret: {name: keyledger-role-team-b}}
`)))
	cluster := suite.Find(t, suite.Render(t, fsys, "/my-journal"), "Cluster", "keyledger-journal")
	roles, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "managed", "roles")
	require.Len(t, roles, 2)
	require.Equal(t, suite.JournalRole("team-b"), roles[1].(map[string]any)["name"])
	_, err := a.Apply(t.Context(), cluster, e.NS, true)
	require.NoError(t, err, "the CRD accepts the Cluster with the added role")
}
