package integration

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// setVersion moves the live counter by hand, as an operator would.
func (e *env) setVersion(name, version string) *corev1.Secret {
	e.t.Helper()
	cur := e.getSecret(name)
	cur.Annotations["keyledger.dev/version"] = version
	out, err := e.kube.Client().CoreV1().Secrets(e.ns).Update(e.t.Context(), cur, metav1.UpdateOptions{})
	require.NoError(e.t, err)
	return out
}

// addFinalizer adds a finalizer to a Secret as admin; removed at cleanup.
func (e *env) addFinalizer(name string) {
	e.t.Helper()
	c := e.kube.Client().CoreV1().Secrets(e.ns)
	_, err := c.Patch(e.t.Context(), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":["keyledger.test/hold"]}}`), metav1.PatchOptions{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { e.removeFinalizers(name) })
}

// An archive whose create answer was lost is accepted only if nothing holds
// or deletes it: a finalizer, or a deletion in progress, blocks the live
// write (exit 2, its own reason).
func TestIntegrationVersionedHeldOccupantBlocks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("fin", "term")
	for _, tc := range []struct{ name, reason string }{{"fin", "snapshot-finalizers"}, {"term", "snapshot-terminating"}} {
		t.Run(tc.name, func(t *testing.T) {
			s := e.createSecret(plainSecret(tc.name, map[string][]byte{"k": vCanary("0")}))
			cmd := updateCommand(e.ns, tc.name, s.ResourceVersion, "mut-"+tc.name, map[string][]byte{"k": vCanary("1")})
			r := e.runCmd(cmd, as, withFailpoint("after-send#1")) // the snapshot exists, its answer is not journaled
			require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)
			snap := versioned.SnapshotName(s.UID, 1)
			e.addFinalizer(snap)
			if tc.name == "term" {
				require.NoError(t, e.kube.Client().CoreV1().Secrets(e.ns).Delete(t.Context(), snap, metav1.DeleteOptions{}))
			}
			requireRefused(t, e.runCmd(cmd, as), tc.reason)
			require.Equal(t, s.ResourceVersion, e.getSecret(tc.name).ResourceVersion, "the live write is blocked")
		})
	}
}

// The archive is checked again on a rerun: one deleted after its create was
// journaled blocks the live write (archive-missing); keyledger does not
// re-create it.
func TestIntegrationVersionedMissingArchiveBlocks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("gone")
	s := e.createSecret(plainSecret("gone", map[string][]byte{"k": vCanary("0")}))
	cmd := updateCommand(e.ns, "gone", s.ResourceVersion, "mut-gone", map[string][]byte{"k": vCanary("1")})
	r := e.runCmd(cmd, as, withFailpoint("after-answer#1"))
	require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.NoError(t, e.kube.Client().CoreV1().Secrets(e.ns).Delete(t.Context(), versioned.SnapshotName(s.UID, 1), metav1.DeleteOptions{}))
	requireRefused(t, e.runCmd(cmd, as), "archive-missing")
	require.Equal(t, s.ResourceVersion, e.getSecret("gone").ResourceVersion)
	require.Empty(t, e.snapshotsOf(s.UID), "not re-created")
}

// A live counter moved back behind keyledger's own retained history is
// refused (counter-behind, exit 2) before anything is written, even where
// the slot it names is free.
func TestIntegrationVersionedCounterBehind(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("back")
	limit := withEnv("KEYLEDGER_HISTORY_LIMIT=2")
	s := e.createSecret(plainSecret("back", map[string][]byte{"k": vCanary("0")}))
	for i := 1; i <= 3; i++ {
		requireOK(t, e.update("back", fmt.Sprint("mut-b", i), vCanary(fmt.Sprint(i)), as, limit), "completed")
	}
	before := e.objectsOf(s.UID)
	require.Len(t, before, 2, "v2 and v3")
	moved := e.setVersion("back", "1") // slot v1 is free: retention freed it
	out := requireRefused(t, e.update("back", "mut-b4", vCanary("4"), as, limit), "counter-behind")
	require.EqualValues(t, 3, out["newestVersion"])
	require.Equal(t, moved.ResourceVersion, e.getSecret("back").ResourceVersion)
	require.Equal(t, before, e.objectsOf(s.UID), "history untouched")

	// Moved back onto keyledger's newest snapshot: that slot holds another
	// source state (source-conflict), and nothing is written.
	moved = e.setVersion("back", "3")
	requireRefused(t, e.update("back", "mut-b5", vCanary("5"), as, limit), "source-conflict")
	require.Equal(t, moved.ResourceVersion, e.getSecret("back").ResourceVersion)
	require.Equal(t, before, e.objectsOf(s.UID), "history untouched")
}

// A delete keeping history touches no snapshot: none created, none deleted.
func TestIntegrationVersionedDeleteKeepsHistoryUntouched(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("keep")
	limit := withEnv("KEYLEDGER_HISTORY_LIMIT=1")
	s := e.createSecret(plainSecret("keep", map[string][]byte{"k": vCanary("0")}))
	requireOK(t, e.update("keep", "mut-k1", vCanary("1"), as, limit), "completed")
	requireOK(t, e.update("keep", "mut-k2", vCanary("2"), as, limit), "completed")
	before := e.objectsOf(s.UID)
	require.Len(t, before, 1)
	cur := e.getSecret("keep")
	out := requireOK(t, e.runCmd(deleteCommand(e.ns, "keep", cur.ResourceVersion, "mut-kdel", true), as, limit), "deleted")
	require.Equal(t, "kept", out["history"])
	require.Equal(t, before, e.objectsOf(s.UID), "the same snapshots, unchanged")
	_, records := e.journalOf("mut-kdel")
	var steps []string
	for _, rec := range records {
		if rec.Kind == store.RecordAuthorityCall {
			steps = append(steps, rec.Step)
		}
	}
	require.Equal(t, []string{"delete-live"}, steps)
}

// denyDelete makes the API server refuse every DELETE of the Secret name
// in this namespace (a ValidatingAdmissionPolicy), and waits until it
// does. The returned function lifts it and waits until deletes pass.
func (e *env) denyDelete(name string) (lift func()) {
	e.t.Helper()
	ctx, c := e.t.Context(), e.kube.Client().AdmissionregistrationV1()
	policy := "keyledger-test-deny-" + e.ns
	fail := admissionv1.Fail
	_, err := c.ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.ns}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Delete},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				}}},
			},
			Validations: []admissionv1.Validation{{Expression: fmt.Sprintf("request.name != %q", name), Message: "held by a test policy"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	_, err = c.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	denied := func() bool {
		err := e.kube.Client().CoreV1().Secrets(e.ns).Delete(ctx, name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "held by a test policy")
	}
	require.Eventually(e.t, denied, time.Minute, 200*time.Millisecond, "the policy takes effect")
	lifted := false
	lift = func() {
		if lifted {
			return
		}
		lifted = true
		_ = c.ValidatingAdmissionPolicyBindings().Delete(ctx, policy, metav1.DeleteOptions{})
		_ = c.ValidatingAdmissionPolicies().Delete(ctx, policy, metav1.DeleteOptions{})
		require.Eventually(e.t, func() bool { return !denied() }, time.Minute, 200*time.Millisecond, "the policy is lifted")
	}
	e.t.Cleanup(lift)
	return lift
}

// A cleanup delete the API server refuses (an admission policy) leaves the
// operation open: exit 75, and the same command rerun retries it and
// completes. (Pending cleanups: TestIntegrationVersionedRetention.)
func TestIntegrationVersionedFailedCleanupRetries(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("prune", "purge")
	limit := withEnv("KEYLEDGER_HISTORY_LIMIT=1")

	s := e.createSecret(plainSecret("prune", map[string][]byte{"k": vCanary("0")}))
	requireOK(t, e.update("prune", "mut-p1", vCanary("1"), as, limit), "completed")
	lift := e.denyDelete(versioned.SnapshotName(s.UID, 1))
	before := e.getSecret("prune")
	cmd := updateCommand(e.ns, "prune", before.ResourceVersion, "mut-p2", map[string][]byte{"k": vCanary("2")})
	r := e.runCmd(cmd, as, limit)
	require.Equal(t, 75, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, before.ResourceVersion, e.getSecret("prune").ResourceVersion, "the live write waits")
	op, _ := e.journalOf("mut-p2")
	require.False(t, op.State.Terminal(), "the operation stays open")
	lift()
	requireOK(t, e.runCmd(cmd, as, limit), "completed")
	require.Equal(t, []string{"2"}, e.versionsOf(s.UID))
	require.Equal(t, vCanary("2"), e.getSecret("prune").Data["k"])

	p := e.createSecret(plainSecret("purge", map[string][]byte{"k": vCanary("0")}))
	requireOK(t, e.update("purge", "mut-q1", vCanary("1"), as), "completed")
	lift = e.denyDelete(versioned.SnapshotName(p.UID, 1))
	cur := e.getSecret("purge")
	del := deleteCommand(e.ns, "purge", cur.ResourceVersion, "mut-qdel", false)
	r = e.runCmd(del, as)
	require.Equal(t, 75, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, cur.ResourceVersion, e.getSecret("purge").ResourceVersion, "the live delete waits")
	lift()
	requireOK(t, e.runCmd(del, as), "deleted")
	require.Empty(t, e.snapshotsOf(p.UID))
}

// Restores and updates that bring no new bytes are bounded by what the API
// server counts (raw keys and values), not by the contract's estimate; new
// data is (UTF-8 bytes x 1.4 against 1 MiB). 760 KiB of values are under
// 1 MiB as base64 (x 4/3) but over it at x 1.4: an update bringing new data
// exits 64 before the journal is contacted, while the restore of a snapshot
// of the same decoded size proceeds.
func TestIntegrationVersionedSizeBounds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("large")
	blob := make([]byte, 760<<10) // 760 KiB raw: about 1.04 MiB at x 1.4, 0.99 MiB as base64
	for i := range blob {
		blob[i] = byte(i)
	}
	s := e.createSecret(plainSecret("large", map[string][]byte{"blob": blob, "small": vCanary("s")}))

	// New data over the estimate: exit 64, no journal connection, nothing written.
	url, connections := pgListener(t)
	r := e.runCmd(updateCommand(e.ns, "large", s.ResourceVersion, "mut-l0", map[string][]byte{"new": vCanary("n")}), as, withDatabase(url))
	require.Equal(t, 64, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Contains(t, outcome(t, r)["error"], "x 1.4")
	require.Zero(t, connections.Load(), "the journal is never contacted")
	require.Equal(t, s.ResourceVersion, e.getSecret("large").ResourceVersion)
	require.Empty(t, e.snapshotsOf(s.UID))
	assertNoCanary(t, r.Stdout+r.Stderr, vCanary("s"), vCanary("n"))

	// Removing a key brings no new bytes: accepted.
	requireOK(t, e.runCmd(updateCommand(e.ns, "large", s.ResourceVersion, "mut-l1", nil, "small"), as), "completed")
	v2 := e.getSecret("large")
	require.Equal(t, map[string][]byte{"blob": blob}, v2.Data)
	// Restoring version 1 (760 KiB and the small key, raw): accepted, byte for byte.
	requireOK(t, e.runCmd(restoreCommand(e.ns, "large", v2.ResourceVersion, "mut-l2", 1), as), "completed")
	require.Equal(t, s.Data, e.getSecret("large").Data)
}

// A keyledger write leaves no kubectl last-applied copy of the old values,
// says so in its outcome, and snapshots never carry it. history --show-keys
// shows which values are equal without any digest testable offline.
func TestIntegrationVersionedNothingGuessable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("app")
	old, next := vCanary("old"), vCanary("next")
	applied := plainSecret("app", map[string][]byte{"password": old, "user": []byte("app")})
	lastApplied, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "app"},
		"data": map[string]string{"password": base64.StdEncoding.EncodeToString(old), "user": base64.StdEncoding.EncodeToString([]byte("app"))}})
	require.NoError(t, err)
	applied.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(lastApplied)}
	s := e.createSecret(applied)

	r := e.runCmd(updateCommand(e.ns, "app", s.ResourceVersion, "mut-a1", map[string][]byte{"password": next}), as)
	out := requireOK(t, r, "completed")
	require.Equal(t, []any{"kubectl.kubernetes.io/last-applied-configuration"}, out["droppedAnnotations"])
	live := e.getSecret("app")
	require.NotContains(t, live.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
	for k, v := range live.Annotations {
		assertNoCanary(t, k+"="+v, old)
	}
	snap := e.requireSnapshot(s, 1, "mut-a1")
	require.NotContains(t, snap.Annotations, "kubectl.kubernetes.io/last-applied-configuration")

	// Restore v1: the live password is old again.
	requireOK(t, e.runCmd(restoreCommand(e.ns, "app", live.ResourceVersion, "mut-a2", 1), as), "completed")
	show := func() (versioned.History, string) {
		h := e.keyledger([]string{"history", e.ns + "/app", "--show-keys", "-o", "json"}, as)
		require.Equal(t, 0, h.Code, "%s %s", h.Stdout, h.Stderr)
		var hist versioned.History
		require.NoError(t, json.Unmarshal([]byte(h.Stdout), &hist))
		return hist, h.Stdout + h.Stderr
	}
	digest := func(keys []versioned.KeyInfo, name string) string {
		for _, k := range keys {
			if k.Name == name {
				require.True(t, strings.HasPrefix(k.Digest, "hmac-sha256:"), k.Digest)
				return k.Digest
			}
		}
		t.Fatalf("no key %s", name)
		return ""
	}
	h1, text1 := show()
	require.Equal(t, []int64{1, 2}, historyVersions(h1))
	require.Equal(t, digest(h1.Live, "password"), digest(h1.Versions[0].Keys, "password"), "the live value is version 1's")
	require.NotEqual(t, digest(h1.Live, "password"), digest(h1.Versions[1].Keys, "password"), "version 2's differs")
	require.Equal(t, digest(h1.Versions[0].Keys, "user"), digest(h1.Versions[1].Keys, "user"))
	h2, text2 := show()
	require.NotEqual(t, digest(h1.Live, "password"), digest(h2.Live, "password"), "keyed per invocation: not comparable across runs")
	table := e.keyledger([]string{"history", e.ns + "/app", "--version", "2", "--show-keys"}, as)
	require.Equal(t, 0, table.Code, table.Stderr)
	for _, text := range []string{text1, text2, table.Stdout + table.Stderr} {
		assertNoCanary(t, text, old, next)
		for _, v := range [][]byte{old, next, []byte("app")} {
			sum := sha256.Sum256(v)
			require.NotContains(t, text, hex.EncodeToString(sum[:]), "no plain SHA-256 of any value")
		}
	}
}

// The largest valid SecretUpdate decodes (its verifier work is bounded:
// `make bench` prints the CPU it takes), runs and completes, so every record
// it produces fits the journal; one key more is refused with exit 64 naming
// the limit, before PostgreSQL is contacted.
func TestIntegrationVersionedLargestUpdate(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("wide")
	s := e.createSecret(plainSecret("wide", map[string][]byte{"k": vCanary("0")}))

	url, connections := pgListener(t)
	over, _ := maximalUpdate(e.ns, "wide", s.ResourceVersion, "mut-over", 1)
	r := e.runCmd(over, as, withDatabase(url))
	require.Equal(t, 64, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Contains(t, outcome(t, r)["error"], fmt.Sprintf("at most %d keys", versioned.MaxUpdateKeys))
	require.Zero(t, connections.Load())

	cmd, data := maximalUpdate(e.ns, "wide", s.ResourceVersion, "mut-wide", 0)
	path := e.writeCommand("mut-wide.json", cmd)
	require.Len(t, data, versioned.MaxUpdateKeys)
	r = e.keyledger([]string{"run", path}, as)
	requireOK(t, r, "completed")
	live := e.getSecret("wide")
	require.Len(t, live.Data, versioned.MaxUpdateKeys+1)
	for k, v := range data {
		require.Equal(t, v, live.Data[k])
	}
	op, records := e.journalOf("mut-wide")
	require.Equal(t, store.StateCompleted, op.State)
	require.NotZero(t, count(records, store.RecordPreparation))
}
