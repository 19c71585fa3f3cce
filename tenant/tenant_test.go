package tenant

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/store"
)

// fakeJournal holds grants and roles in memory.
type fakeJournal struct {
	roles  map[string]bool
	grants map[[2]string]bool
	// reconcile runs before RoleExists answers (CloudNativePG at work).
	reconcile func()
}

func (f *fakeJournal) Grant(_ context.Context, role string, ns ...string) ([]store.GrantChange, error) {
	if !f.roles[role] {
		return nil, &store.PreconditionError{Reason: store.ReasonRoleMissing, Msg: "no role " + role}
	}
	k := [2]string{role, ns[0]}
	changed := !f.grants[k]
	f.grants[k] = true
	return []store.GrantChange{{Action: store.GrantActionGrant, Role: role, Namespace: ns[0], Changed: changed}}, nil
}

func (f *fakeJournal) Revoke(_ context.Context, role string, ns ...string) ([]store.GrantChange, error) {
	k := [2]string{role, ns[0]}
	changed := f.grants[k]
	delete(f.grants, k)
	return []store.GrantChange{{Action: store.GrantActionRevoke, Role: role, Namespace: ns[0], Changed: changed}}, nil
}

func (f *fakeJournal) Grants(context.Context) ([]store.NamespaceGrant, error) {
	var out []store.NamespaceGrant
	for k := range f.grants {
		out = append(out, store.NamespaceGrant{Role: k[0], Namespace: k[1]})
	}
	return out, nil
}

func (f *fakeJournal) RoleExists(_ context.Context, role string) (bool, error) {
	if f.reconcile != nil {
		f.reconcile()
	}
	return f.roles[role], nil
}

func obj(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns, "resourceVersion": "1"}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

// world is a cluster with the journal installed, CloudNativePG simulated
// (a get of the Cluster reconciles its managed roles into the journal's
// roles and the status) and the namespace team-a.
type world struct {
	dyn     *dynfake.FakeDynamicClient
	journal *fakeJournal
	admin   *Admin
}

func newWorld(t *testing.T, otherRoles ...any) *world {
	t.Helper()
	cluster := obj("postgresql.cnpg.io/v1", "Cluster", JournalNamespace, JournalCluster, map[string]any{
		"spec": map[string]any{"instances": int64(3), "managed": map[string]any{"roles": otherRoles}}})
	objs := []runtime.Object{cluster,
		obj("v1", "Namespace", "", "team-a", nil),
		obj("v1", "Secret", JournalNamespace, CASecret, map[string]any{"data": map[string]any{
			"ca.crt": "Q0EtQ0VSVA==", "ca.key": "S0VZ"}}),
		obj("discovery.k8s.io/v1", "EndpointSlice", "default", "kubernetes", map[string]any{
			"addressType": "IPv4", "endpoints": []any{map[string]any{"addresses": []any{"10.0.0.1"}}},
			"ports": []any{map[string]any{"name": "https", "port": int64(6443), "protocol": "TCP"}}}),
	}
	objs[3].(*unstructured.Unstructured).SetLabels(map[string]string{"kubernetes.io/service-name": "kubernetes"})
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		sliceKind.GVR: "EndpointSliceList", clusterKind.GVR: "ClusterList", secretKind.GVR: "SecretList",
		configMapKind.GVR: "ConfigMapList", policyKind.GVR: "NetworkPolicyList", namespaceKind.GVR: "NamespaceList"}, objs...)
	w := &world{dyn: dyn, journal: &fakeJournal{roles: map[string]bool{}, grants: map[[2]string]bool{}}}
	dyn.PrependReactor("get", "clusters", w.reconcile)
	w.journal.reconcile = func() { _, _, _ = w.reconcile(nil) }
	w.admin = &Admin{Dynamic: dyn, Journal: w.journal, Wait: 5e9, Poll: 1e6}
	return w
}

// reconcile is CloudNativePG as the steps see it: every present role
// exists and is reconciled with its Secret's resourceVersion, every absent
// one is dropped.
func (w *world) reconcile(k8stesting.Action) (bool, runtime.Object, error) {
	o, err := w.dyn.Tracker().Get(clusterKind.GVR, JournalNamespace, JournalCluster)
	if err != nil {
		return true, nil, err
	}
	u := o.(*unstructured.Unstructured).DeepCopy()
	roles, _, _ := unstructured.NestedSlice(u.Object, "spec", "managed", "roles")
	var reconciled []any
	pw := map[string]any{}
	for _, r := range roles {
		m := r.(map[string]any)
		name := m["name"].(string)
		w.journal.roles[name] = m["ensure"] == "present"
		reconciled = append(reconciled, name)
		pw[name] = map[string]any{"resourceVersion": ""}
	}
	_ = unstructured.SetNestedField(u.Object, map[string]any{"byStatus": map[string]any{"reconciled": reconciled}, "passwordStatus": pw},
		"status", "managedRolesStatus")
	return true, u, nil
}

func (w *world) secret(t *testing.T, ns, name string) map[string]any {
	t.Helper()
	o, err := w.dyn.Tracker().Get(secretKind.GVR, ns, name)
	if err != nil {
		return nil
	}
	return o.(*unstructured.Unstructured).Object
}

func (w *world) roles(t *testing.T) []any {
	t.Helper()
	o, err := w.dyn.Tracker().Get(clusterKind.GVR, JournalNamespace, JournalCluster)
	require.NoError(t, err)
	roles, _, _ := unstructured.NestedSlice(o.(*unstructured.Unstructured).Object, "spec", "managed", "roles")
	return roles
}

func actions(changes []Change) []Action {
	var out []Action
	for _, c := range changes {
		out = append(out, c.Action)
	}
	return out
}

func password(t *testing.T, s map[string]any) string {
	t.Helper()
	v, _, _ := unstructured.NestedString(s, "data", "password")
	require.NotEmpty(t, v)
	return v
}

func TestOnboardCreatesThenChangesNothing(t *testing.T) {
	other := map[string]any{"name": "someone_else", "ensure": "present", "login": true}
	w := newWorld(t, other)
	changes, err := w.admin.Onboard(t.Context(), "team-a")
	require.NoError(t, err)
	require.Equal(t, []Action{Created, Created, Created, Created, Created, Created}, actions(changes))
	require.True(t, Changed(changes))
	jobs, cnpg := w.secret(t, "team-a", CredentialsSecret), w.secret(t, JournalNamespace, "keyledger-role-team-a")
	require.Equal(t, password(t, cnpg), password(t, jobs), "one password in both Secrets")
	require.Equal(t, "true", cnpg["metadata"].(map[string]any)["labels"].(map[string]any)[reloadLabel])
	require.Equal(t, []any{other, managedRole(Names{Namespace: "team-a", Role: "keyledger_team_a", RoleSecret: "keyledger-role-team-a"}, true)},
		w.roles(t), "the other role is kept, ours appended")
	require.True(t, w.journal.grants[[2]string{"keyledger_team_a", "team-a"}])
	b, _ := json.Marshal(changes)
	for _, c := range changes {
		b = append(b, c.String()...)
	}
	require.NotContains(t, string(b), password(t, cnpg), "no change holds the password")

	w.dyn.ClearActions()
	again, err := w.admin.Onboard(t.Context(), "team-a")
	require.NoError(t, err)
	require.Equal(t, []Action{Unchanged, Unchanged, Unchanged, Unchanged, Unchanged, Unchanged}, actions(again))
	require.False(t, Changed(again))
	for _, a := range w.dyn.Actions() {
		require.Contains(t, []string{"get", "list"}, a.GetVerb(), "a second onboard only reads")
	}
}

func TestOnboardRepairsWhatDiffers(t *testing.T) {
	w := newWorld(t, map[string]any{"name": "keyledger_team_a", "ensure": "present", "login": true, "bypassrls": true})
	_, err := w.admin.Onboard(t.Context(), "team-a")
	require.NoError(t, err)
	require.Len(t, w.roles(t), 1, "our entry is replaced, not appended")
	require.Equal(t, false, w.roles(t)[0].(map[string]any)["bypassrls"])
	// The Jobs' copy drifted; CloudNativePG rotated its CA.
	jobs := obj("v1", "Secret", "team-a", CredentialsSecret, map[string]any{"type": "kubernetes.io/basic-auth",
		"data": map[string]any{"username": "a2V5bGVkZ2VyX3RlYW1fYQ==", "password": "b2xk"}})
	require.NoError(t, w.dyn.Tracker().Update(secretKind.GVR, jobs, "team-a"))
	ca := obj("v1", "Secret", JournalNamespace, CASecret, map[string]any{"data": map[string]any{"ca.crt": "TkVXLUNB"}})
	require.NoError(t, w.dyn.Tracker().Update(secretKind.GVR, ca, JournalNamespace))
	changes, err := w.admin.Onboard(t.Context(), "team-a")
	require.NoError(t, err)
	require.Equal(t, []Action{Unchanged, Unchanged, Unchanged, Updated, Unchanged, Updated}, actions(changes))
	require.Equal(t, password(t, w.secret(t, JournalNamespace, "keyledger-role-team-a")), password(t, w.secret(t, "team-a", CredentialsSecret)))
	cm, err := w.dyn.Tracker().Get(configMapKind.GVR, "team-a", CAConfigMap)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"ca.crt": "NEW-CA"}, cm.(*unstructured.Unstructured).Object["data"], "only ca.crt, refreshed")
}

func TestDryRunWritesNothing(t *testing.T) {
	w := newWorld(t)
	w.admin.DryRun = true
	for _, run := range []func(context.Context, string) ([]Change, error){w.admin.Onboard, w.admin.Offboard} {
		changes, err := run(t.Context(), "team-a")
		require.NoError(t, err)
		for _, c := range changes {
			require.True(t, c.DryRun)
		}
	}
	for _, a := range w.dyn.Actions() {
		require.Contains(t, []string{"get", "list"}, a.GetVerb(), "a dry run only reads")
	}
	require.Empty(t, w.journal.grants)
	changes, _ := (&Admin{Dynamic: w.dyn, Journal: w.journal, DryRun: true, Wait: 1}).Onboard(t.Context(), "team-a")
	require.Equal(t, "would create Secret keyledger-journal/keyledger-role-team-a", changes[0].String())
}

func TestRotateChangesBothCopies(t *testing.T) {
	w := newWorld(t)
	_, err := w.admin.Rotate(t.Context(), "team-a")
	requireReason(t, err, ReasonNotOnboarded)
	_, err = w.admin.Onboard(t.Context(), "team-a")
	require.NoError(t, err)
	before := password(t, w.secret(t, "team-a", CredentialsSecret))
	changes, err := w.admin.Rotate(t.Context(), "team-a")
	require.NoError(t, err)
	require.Equal(t, []Action{Updated, Updated}, actions(changes))
	after := password(t, w.secret(t, "team-a", CredentialsSecret))
	require.NotEqual(t, before, after)
	require.Equal(t, after, password(t, w.secret(t, JournalNamespace, "keyledger-role-team-a")))
}

func TestOffboardRemovesWhatOnboardMade(t *testing.T) {
	w := newWorld(t)
	_, err := w.admin.Onboard(t.Context(), "team-a")
	require.NoError(t, err)
	changes, err := w.admin.Offboard(t.Context(), "team-a")
	require.NoError(t, err)
	require.Equal(t, []Action{Deleted, Deleted, Deleted, Deleted, Deleted, Deleted}, actions(changes))
	require.Equal(t, []any{map[string]any{"name": "keyledger_team_a", "ensure": "absent", "connectionLimit": int64(-1), "inherit": true}}, w.roles(t))
	require.False(t, w.journal.roles["keyledger_team_a"])
	require.Empty(t, w.journal.grants)
	require.Nil(t, w.secret(t, "team-a", CredentialsSecret))
	again, err := w.admin.Offboard(t.Context(), "team-a")
	require.NoError(t, err)
	require.Equal(t, []Action{Absent, Absent, Absent, Absent, Absent, Absent}, actions(again))
}

func TestRefusals(t *testing.T) {
	for ns, reason := range map[string]string{
		"Team_A":         store.ReasonInvalidNamespace,
		JournalNamespace: ReasonNamespaceIsJournal,
		"a-namespace-name-that-is-fifty-four-characters-long-xy": store.ReasonInvalidNamespace,
		"team-b": ReasonNamespaceMissing,
	} {
		w := newWorld(t)
		_, err := w.admin.Onboard(t.Context(), ns)
		requireReason(t, err, reason)
		for _, a := range w.dyn.Actions() {
			require.Contains(t, []string{"get", "list"}, a.GetVerb(), "%s: refused before any write", ns)
		}
	}
	w := newWorld(t)
	require.NoError(t, w.dyn.Tracker().Delete(clusterKind.GVR, JournalNamespace, JournalCluster))
	_, err := w.admin.Onboard(t.Context(), "team-a")
	requireReason(t, err, ReasonJournalClusterMissing)
	require.Nil(t, w.secret(t, JournalNamespace, "keyledger-role-team-a"), "nothing written without a journal")
}

func TestRoleNotReconciledInTime(t *testing.T) {
	w := newWorld(t)
	w.dyn.PrependReactor("get", "clusters", func(k8stesting.Action) (bool, runtime.Object, error) {
		o, err := w.dyn.Tracker().Get(clusterKind.GVR, JournalNamespace, JournalCluster)
		return true, o, err // an operator that never reconciles
	})
	w.admin.Wait = 20e6
	_, err := w.admin.Onboard(t.Context(), "team-a")
	requireReason(t, err, ReasonRoleNotReconciled)
	require.Nil(t, w.secret(t, "team-a", CredentialsSecret), "the Jobs' login comes last")
}

func requireReason(t *testing.T, err error, reason string) {
	t.Helper()
	var p *store.PreconditionError
	require.ErrorAs(t, err, &p)
	require.Equal(t, reason, p.Reason, "%v", err)
}

// TestFenceIsDeployCredentials: the policy onboard writes is
// deploy/credentials/networkpolicy.yaml with components/api-egress filled
// in, one rule per API server endpoint.
func TestFenceIsDeployCredentials(t *testing.T) {
	b, err := os.ReadFile("../deploy/credentials/networkpolicy.yaml")
	require.NoError(t, err)
	var shipped networkingv1.NetworkPolicy
	require.NoError(t, yaml.UnmarshalStrict(b, &shipped))
	api := []APIEndpoint{{Addr: mustAddr("10.0.0.1"), Port: 6443}, {Addr: mustAddr("10.0.0.2"), Port: 6443}}
	got := fence(api)
	require.Equal(t, shipped.Name, FencePolicy)
	require.Equal(t, shipped.Spec.PodSelector, got.Spec.PodSelector)
	require.Equal(t, shipped.Spec.PolicyTypes, got.Spec.PolicyTypes)
	require.Empty(t, shipped.Spec.Ingress)
	require.Empty(t, got.Spec.Ingress)
	require.Equal(t, shipped.Spec.Egress, got.Spec.Egress[:len(shipped.Spec.Egress)])
	extra := got.Spec.Egress[len(shipped.Spec.Egress):]
	require.Len(t, extra, 2)
	for i, r := range extra {
		require.Equal(t, api[i].Addr.String()+"/32", r.To[0].IPBlock.CIDR)
		require.Equal(t, int32(6443), r.Ports[0].Port.IntVal)
	}
	require.True(t, slices.ContainsFunc(got.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
		return bytes.Contains([]byte(r.To[0].String()), []byte("instanceRole"))
	}))
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestReasonsDocumented: deploy/README.md's table of onboarding failures
// has a row for every reason of this package, with the exit code the
// error gives.
func TestReasonsDocumented(t *testing.T) {
	b, err := os.ReadFile("../deploy/README.md")
	require.NoError(t, err)
	unavailableReasons := map[string]bool{ReasonJournalCAMissing: true, ReasonAPIEndpointMissing: true,
		ReasonRoleNotReconciled: true, ReasonRoleCannotReconcile: true, ReasonObjectChanged: true, ReasonKubernetesRejected: true}
	for _, r := range Reasons() {
		code := "64"
		if unavailableReasons[r] {
			code = "69"
		}
		require.Contains(t, string(b), "| `"+r+"` | "+code+" |", "deploy/README.md, When onboarding fails")
	}
}
