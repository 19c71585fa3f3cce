package integration

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/keyledger/keyledger/workflow/versioned"
)

// planter is another identity in the namespace: it may create and get
// Secrets and nothing else, which is all a look-alike needs.
func (e *env) planter() kubernetes.Interface {
	e.t.Helper()
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "get"}}}
	ctx, c := e.t.Context(), e.kube.Client()
	_, err := c.RbacV1().Roles(e.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "planter"}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	_, err = c.RbacV1().RoleBindings(e.ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "planter"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "planter"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "planter", Namespace: e.ns}},
	}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	cfg, err := e.kube.ServiceAccountConfig(ctx, e.ns, "planter", 600)
	require.NoError(e.t, err)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(e.t, err)
	return client
}

// lookalike is a perfect copy of the snapshot format for version n of
// live (as keyledger wrote it before nonces existed, which it still
// accepts), computed from what anyone can read (the UID, the
// resourceVersion), holding other data.
func lookalike(live *corev1.Secret, n int64, data map[string][]byte) *corev1.Secret {
	yes := true
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: versioned.SnapshotName(live.UID, n),
			Labels: map[string]string{"keyledger.dev/managed-by": "keyledger", "keyledger.dev/kind": "history",
				"keyledger.dev/source-uid": versioned.Hash(string(live.UID)), "keyledger.dev/source-resource-version": versioned.Hash(live.ResourceVersion)},
			Annotations: map[string]string{"keyledger.dev/history-format": "uid-rv-v1", "keyledger.dev/source-uid": string(live.UID),
				"keyledger.dev/source-resource-version": live.ResourceVersion, "keyledger.dev/source-name": live.Name,
				"keyledger.dev/source-type": string(live.Type), "keyledger.dev/version": fmt.Sprint(n),
				"keyledger.dev/snapshot-time": "2026-01-01T00:00:00Z", "keyledger.dev/actor": "req-x/mut-x"},
		},
		Type: corev1.SecretTypeOpaque, Immutable: &yes, Data: data,
	}
}

// uidsOf maps each snapshot name of live to its UID and resourceVersion.
func (e *env) objectsOf(uid types.UID) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, s := range e.snapshotsOf(uid) {
		out[s.Name] = string(s.UID) + "@" + s.ResourceVersion
	}
	return out
}

// update runs one SecretUpdate of name from its current state.
func (e *env) update(name, mutation string, value []byte, opts ...runOption) result {
	e.t.Helper()
	cur := e.getSecret(name)
	return e.runCmd(updateCommand(e.ns, name, cur.ResourceVersion, mutation, map[string][]byte{"k": value}), opts...)
}

// history runs `keyledger history` and decodes its JSON.
func (e *env) history(name string, opts ...runOption) versioned.History {
	e.t.Helper()
	h := e.keyledger([]string{"history", e.ns + "/" + name, "-o", "json"}, opts...)
	require.Equal(e.t, 0, h.Code, "%s %s", h.Stdout, h.Stderr)
	var hist versioned.History
	require.NoError(e.t, json.Unmarshal([]byte(h.Stdout), &hist))
	return hist
}

func historyVersions(h versioned.History) []int64 {
	var out []int64
	for _, v := range h.Versions {
		out = append(out, v.Version)
	}
	return out
}

// Twenty look-alikes above the live counter, planted by another identity,
// neither steer pruning nor count as history: the write is refused with
// its own reason, nothing is deleted, and the documented recovery (raise
// the counter by hand, rerun) works.
func TestIntegrationVersionedPlantedLookalikes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("db")
	s := e.createSecret(plainSecret("db", map[string][]byte{"k": vCanary("0")}))
	for i := 1; i <= 3; i++ {
		requireOK(t, e.update("db", fmt.Sprint("mut-u", i), vCanary(fmt.Sprint(i)), as), "completed")
	}
	genuine := e.objectsOf(s.UID)
	require.Len(t, genuine, 3)

	live := e.getSecret("db")
	require.Equal(t, "4", live.Annotations["keyledger.dev/version"])
	planter := e.planter()
	var planted []string
	for n := int64(5); n < 25; n++ {
		obj, err := planter.CoreV1().Secrets(e.ns).Create(t.Context(), lookalike(live, n, map[string][]byte{"k": vCanary("evil")}), metav1.CreateOptions{})
		require.NoError(t, err)
		planted = append(planted, obj.Name)
	}
	all := e.objectsOf(s.UID)
	require.Len(t, all, 23)

	r := e.update("db", "mut-u4", vCanary("4"), as)
	out := requireRefused(t, r, "slot-occupied")
	require.EqualValues(t, 20, out["occupiedCount"])
	require.EqualValues(t, 24, out["highestOccupied"])
	require.Equal(t, live.ResourceVersion, e.getSecret("db").ResourceVersion, "the live write is refused")
	require.Equal(t, all, e.objectsOf(s.UID), "nothing deleted, nothing created")
	assertNoCanary(t, r.Stdout+r.Stderr, vCanary("evil"), vCanary("4"))

	hist := e.history("db", as)
	require.Equal(t, []int64{1, 2, 3}, historyVersions(hist), "only keyledger's snapshots are history")
	var foreign []string
	for _, f := range hist.Foreign {
		require.Equal(t, versioned.ForeignNotJournaled, f.Reason)
		foreign = append(foreign, f.Name)
	}
	require.ElementsMatch(t, planted, foreign, "every look-alike is reported by name")
	table := e.keyledger([]string{"history", e.ns + "/db"}, as)
	require.Equal(t, 0, table.Code, table.Stderr)
	require.Contains(t, table.Stdout, "foreign: 20 object(s)")
	require.Contains(t, table.Stdout, planted[19])

	// The counter reaching a planted slot is refused the same way.
	cur := e.getSecret("db")
	cur.Annotations["keyledger.dev/version"] = "7"
	_, err := e.kube.Client().CoreV1().Secrets(e.ns).Update(t.Context(), cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	requireRefused(t, e.update("db", "mut-u5", vCanary("5"), as), "slot-occupied")

	// Recovery, reviewed by an operator: raise the counter above every
	// planted slot and run a new command.
	cur = e.getSecret("db")
	cur.Annotations["keyledger.dev/version"] = "25"
	_, err = e.kube.Client().CoreV1().Secrets(e.ns).Update(t.Context(), cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	requireOK(t, e.update("db", "mut-u6", vCanary("6"), as), "completed")
	after := e.objectsOf(s.UID)
	for name, id := range all {
		require.Equal(t, id, after[name], "%s untouched", name)
	}
	require.Len(t, after, 24, "the 23 and the new snapshot of v25")
	require.Equal(t, "26", e.getSecret("db").Annotations["keyledger.dev/version"])
	require.Equal(t, []int64{1, 2, 3, 25}, historyVersions(e.history("db", as)))

	// A delete without history deletes keyledger's snapshots, never a
	// look-alike.
	cur = e.getSecret("db")
	requireOK(t, e.runCmd(deleteCommand(e.ns, "db", cur.ResourceVersion, "mut-del", false), as), "deleted")
	left := e.objectsOf(s.UID)
	require.Len(t, left, 20)
	for _, name := range planted {
		require.Equal(t, all[name], left[name], "%s untouched", name)
	}
}

// After retention freed version 1, a planted -v1 is no restore target, and
// history reports it as foreign.
func TestIntegrationVersionedPlantedRestoreTarget(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("db")
	limit := withEnv("KEYLEDGER_HISTORY_LIMIT=2")
	s := e.createSecret(plainSecret("db", map[string][]byte{"k": vCanary("0")}))
	for i := 1; i <= 3; i++ {
		requireOK(t, e.update("db", fmt.Sprint("mut-u", i), vCanary(fmt.Sprint(i)), as, limit), "completed")
	}
	require.Equal(t, []string{"2", "3"}, e.versionsOf(s.UID), "retention freed v1")
	live := e.getSecret("db")
	_, err := e.planter().CoreV1().Secrets(e.ns).Create(t.Context(), lookalike(live, 1, map[string][]byte{"k": vCanary("evil")}), metav1.CreateOptions{})
	require.NoError(t, err)

	r := e.runCmd(restoreCommand(e.ns, "db", live.ResourceVersion, "mut-r1", 1), as, limit)
	requireRefused(t, r, "foreign-snapshot")
	require.Equal(t, live.ResourceVersion, e.getSecret("db").ResourceVersion)
	require.Equal(t, vCanary("3"), e.getSecret("db").Data["k"])
	assertNoCanary(t, r.Stdout+r.Stderr, vCanary("evil"))

	hist := e.history("db", as)
	require.Equal(t, []int64{2, 3}, historyVersions(hist))
	require.Equal(t, []versioned.Foreign{{Name: versioned.SnapshotName(s.UID, 1), Version: 1, Reason: versioned.ForeignNotJournaled}}, hist.Foreign)
	one := e.keyledger([]string{"history", e.ns + "/db", "--version", "1", "--show-keys"}, as)
	require.Equal(t, 2, one.Code, "%s %s", one.Stdout, one.Stderr)

	// A restore target must be below the live counter.
	requireRefused(t, e.runCmd(restoreCommand(e.ns, "db", live.ResourceVersion, "mut-r4", 4), as, limit), "version-ahead")
	// A genuine version restores.
	requireOK(t, e.runCmd(restoreCommand(e.ns, "db", live.ResourceVersion, "mut-r2", 2), as, limit), "completed")
	require.Equal(t, vCanary("1"), e.getSecret("db").Data["k"])
}
