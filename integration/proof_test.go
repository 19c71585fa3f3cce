package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/credentials"
	"github.com/keyledger/keyledger/workflow/versioned"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// TestIntegrationCredentialsPlantedSecretUnproven: a Secret planted by
// another identity (create and get on Secrets, nothing else) before the
// first run, with a password it knows, and a server in
// the plan that refuses that password. The run keeps the Secret
// (create-if-absent) and does not restart the server onto it: it refuses
// secret-unproven, exit 2, naming the pod, the Secret and its authorship.
// With spec.repair.restartOnUnproven (the plan's next version) the server
// is restarted exactly once onto it, the outcome counts it unproven, and
// the restart's outcome and journal record say it followed an unproven
// Secret.
func TestIntegrationCredentialsPlantedSecretUnproven(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const name = "shop-planted-app"
	known := []byte("CANARY-planted-password-someone-knows")
	_, err := e.planter().CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "shop"}},
		Type:       corev1.SecretTypeOpaque, Data: map[string][]byte{"password": known, "username": []byte("app")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	valkey := startServer(t, "valkey", "127.0.0.8", "", "wrong-password-from-an-old-run")
	pod := e.statefulSet("shop-planted")
	first := e.playServerPod(ctx, pod, valkey, name, "", "password", true)

	server := map[string]any{"protocol": "valkey", "pod": pod, "port": valkey.port, "secret": name, "passwordKey": "password"}
	plan := credentialPlan(e.ns, "mut-planted", []planSecret{standardSecret(name)}, func(spec map[string]any) {
		spec["servers"] = []any{server}
	})
	r := e.keyledger([]string{"run", e.writeCommand("plan.json", plan)}, e.asCredentialRunner(plan))
	out := requireRefused(t, r, credentials.ReasonSecretUnproven)
	require.Equal(t, pod, out["pod"])
	require.Equal(t, name, out["secret"])
	require.Equal(t, "unproven", out["authorship"], "the refusal says the Secret is unproven")
	now, err := e.kube.Client().CoreV1().Pods(e.ns).Get(ctx, pod, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, first, now.UID, "no restart onto an unproven Secret")
	_, records := e.journalOf("mut-planted:run-1")
	require.Empty(t, recordsOf(records, store.RecordAuthorityCall, "delete-pod"))
	require.Equal(t, known, e.getSecret(name).Data["password"], "the planted Secret is kept")

	optIn := credentialPlan(e.ns, "mut-planted", []planSecret{standardSecret(name)}, func(spec map[string]any) {
		spec["servers"] = []any{server}
		spec["repair"] = map[string]any{"restartOnUnproven": true}
	})
	r = e.keyledger([]string{"run", e.writeCommand("opt-in.json", optIn)}, e.asCredentialRunner(optIn))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out = outcome(t, r)
	require.Equal(t, "mut-planted:run-2", out["run"], "the plan's next version")
	require.Equal(t, map[string]any{"planned": 1.0, "created": 0.0, "patched": 0.0, "existing": 1.0, "unchanged": 1.0, "unproven": 1.0}, out["secrets"])
	require.Equal(t, map[string]any{name: "unproven"}, out["authorship"])
	require.Equal(t, map[string]any{"accepted": 1.0, "repaired": 1.0, "skipped": 0.0}, out["servers"])
	require.Equal(t, []any{map[string]any{"pod": pod, "secret": name, "authorship": "unproven"}}, out["restarts"])
	require.Equal(t, known, e.getSecret(name).Data["password"], "the planted Secret is kept")

	_, records = e.journalOf("mut-planted:run-2")
	require.Equal(t, "unproven", readOf(t, records, name)["authorship"])
	deletes := recordsOf(records, store.RecordAuthorityCall, "delete-pod")
	require.Len(t, deletes, 1, "restarted exactly once")
	require.Equal(t, string(first), deletes[0].UID)
	require.Equal(t, name, workflowtest.Fields(deletes[0].Detail)["secret"])
	require.Equal(t, "unproven", workflowtest.Fields(deletes[0].Detail)["authorship"], "the restart's record says it followed an unproven Secret")
	requireNoValues(t, r.Stdout+r.Stderr+e.journalText("mut-planted:run-1")+e.journalText("mut-planted:run-2"), [][]byte{known})
}

// The incident path still repairs: a generator-backed ExternalSecret's
// Secret rewritten under a running server (which kept the old password) is
// adopted by the plan and the server restarted once onto it; the outcome
// and the restart's record say the Secret was adopted, and the next run
// still proves it adopted (by its UID).
func TestIntegrationCredentialsAdoptedRepair(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const name, generator = "shop-incident-app", "shop-incident-password"
	e.adoptable(name, generator) // the Secret holds what the generator wrote last
	valkey := startServer(t, "valkey", "127.0.0.9", "", "the-password-before-the-rewrite")
	pod := e.statefulSet("shop-incident")
	first := e.playServerPod(ctx, pod, valkey, name, "", "password", true)

	plan := credentialPlan(e.ns, "mut-incident", []planSecret{standardSecret(name)}, func(spec map[string]any) {
		spec["adopt"] = []any{map[string]any{"externalSecret": name, "generators": []any{generator}}}
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": pod, "port": valkey.port, "secret": name, "passwordKey": "password"}}
	})
	path := e.writeCommand("plan.json", plan)
	as := e.asCredentialRunner(plan)
	r := e.keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := outcome(t, r)
	require.Equal(t, map[string]any{"accepted": 1.0, "repaired": 1.0, "skipped": 0.0}, out["servers"])
	require.Equal(t, map[string]any{name: "adopted"}, out["authorship"])
	require.EqualValues(t, 0, out["secrets"].(map[string]any)["unproven"])
	require.Equal(t, []any{map[string]any{"pod": pod, "secret": name, "authorship": "adopted"}}, out["restarts"])
	require.Equal(t, []byte("CANARY-generated-by-eso-"+name), e.getSecret(name).Data["password"], "the adopted value is kept")
	_, records := e.journalOf("mut-incident:run-1")
	deletes := recordsOf(records, store.RecordAuthorityCall, "delete-pod")
	require.Len(t, deletes, 1, "restarted once")
	require.Equal(t, string(first), deletes[0].UID)
	require.Equal(t, "adopted", workflowtest.Fields(deletes[0].Detail)["authorship"])

	r = e.keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out = outcome(t, r)
	require.Equal(t, "existing", out["outcome"])
	require.Equal(t, map[string]any{name: "adopted"}, out["authorship"], "run 2 proves the adoption by the Secret's UID")
	require.Equal(t, []any{}, out["restarts"])
}

// Point 5 on the real platform: a refused batch lists only what keyledger
// wrote (a planted Secret its 409 found is kept, not applied), and a kept
// Secret that is complete still gets the terminating and type checks.
func TestIntegrationCredentialsKeptIsNotApplied(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const kept, rejected = "shop-kept-app", "shop-rejected-app"
	_, err := e.planter().CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kept, Labels: map[string]string{"app.kubernetes.io/part-of": "shop"}},
		Type:       corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("CANARY-kept-0123456789"), "username": []byte("app")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.denySecretCreate(rejected)
	plan := credentialPlan(e.ns, "mut-kept", []planSecret{standardSecret(kept), standardSecret(rejected)})
	r := e.keyledger([]string{"run", e.writeCommand("plan.json", plan)}, e.asCredentialRunner(plan))
	require.Equal(t, 2, r.Code, "%s %s", r.Stdout, r.Stderr)
	out := outcome(t, r)
	require.Nil(t, out["applied"], "keyledger wrote nothing: %s", r.Stdout)
	require.Nil(t, out["kept"], "the Secret found in place was never in a create: %s", r.Stdout)
	require.Equal(t, rejected, out["secret"], "the refusal names the one create sent")

	// A complete Secret held by a finalizer and being deleted is refused,
	// as one lacking something is.
	const held = "shop-held-app"
	e.createSecret(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: held, Labels: map[string]string{"app.kubernetes.io/part-of": "shop"}, Finalizers: []string{"example.com/hold"}},
		Type:       corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("CANARY-held-0123456789"), "username": []byte("app")},
	})
	require.NoError(t, e.kube.Client().CoreV1().Secrets(e.ns).Delete(ctx, held, metav1.DeleteOptions{}))
	t.Cleanup(func() { e.removeFinalizers(held) })
	plan = credentialPlan(e.ns, "mut-held", []planSecret{standardSecret(held)})
	requireRefused(t, e.keyledger([]string{"run", e.writeCommand("held.json", plan)}, e.asCredentialRunner(plan)), "secret-terminating")

	// A complete Secret of another type than a create makes, not adopted,
	// is refused as one lacking something is.
	const typed = "shop-typed-app"
	e.createSecret(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: typed, Labels: map[string]string{"app.kubernetes.io/part-of": "shop"}},
		Type:       corev1.SecretTypeBasicAuth, Data: map[string][]byte{"password": []byte("CANARY-typed-0123456789"), "username": []byte("app")},
	})
	plan = credentialPlan(e.ns, "mut-typed", []planSecret{standardSecret(typed)})
	requireRefused(t, e.keyledger([]string{"run", e.writeCommand("typed.json", plan)}, e.asCredentialRunner(plan)), "secret-wrong-type")
}

// A live write interrupted after its call was journaled (the process dies
// before sending it), whose archive another identity deletes before the
// rerun: the rerun re-checks the archive before re-sending, refuses
// archive-missing, and writes nothing. The same for a restore. The journal
// shows no snapshot nonce.
func TestIntegrationVersionedResendRechecksArchive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("upd", "rst")
	t.Run("update", func(t *testing.T) {
		s := e.createSecret(plainSecret("upd", map[string][]byte{"k": vCanary("u0")}))
		cmd := updateCommand(e.ns, "upd", s.ResourceVersion, "mut-upd", map[string][]byte{"k": vCanary("u1")})
		r := e.runCmd(cmd, as, withFailpoint("after-call#2")) // replace-live journaled, never sent
		require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)
		snap := versioned.SnapshotName(s.UID, 1)
		nonce := e.getSecret(snap).Annotations[versioned.AnnotationNonce]
		require.Regexp(t, "^[0-9a-f]{32}$", nonce)
		show := e.keyledger([]string{"journal", "show", "mut-upd", "-o", "json"})
		require.Equal(t, 0, show.Code, show.Stderr)
		require.NotContains(t, show.Stdout, nonce, "journal show prints no nonce")
		require.NotContains(t, show.Stdout, `"nonce"`)
		sum := sha256Hex(nonce)
		require.Contains(t, show.Stdout, sum, "only its digest")

		require.NoError(t, e.kube.Client().CoreV1().Secrets(e.ns).Delete(t.Context(), snap, metav1.DeleteOptions{}))
		r = e.runCmd(cmd, as)
		requireRefused(t, r, "archive-missing")
		require.NotContains(t, r.Stdout, "converged")
		after := e.getSecret("upd")
		require.Equal(t, s.ResourceVersion, after.ResourceVersion, "not written")
		require.Equal(t, vCanary("u0"), after.Data["k"], "the old data is kept")
		op, records := e.journalOf("mut-upd")
		require.Equal(t, store.StateRefused, op.State)
		require.Len(t, recordsOf(records, store.RecordAuthorityCall, "replace-live"), 1, "never sent again")
		assertNoCanary(t, r.Stdout+r.Stderr, vCanary("u0"), vCanary("u1"))
	})
	t.Run("restore", func(t *testing.T) {
		s := e.createSecret(plainSecret("rst", map[string][]byte{"k": vCanary("r0")}))
		requireOK(t, e.update("rst", "mut-rst-1", vCanary("r1"), as), "completed")
		live := e.getSecret("rst")
		cmd := restoreCommand(e.ns, "rst", live.ResourceVersion, "mut-rst", 1)
		r := e.runCmd(cmd, as, withFailpoint("after-call#2"))
		require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)
		require.NoError(t, e.kube.Client().CoreV1().Secrets(e.ns).Delete(t.Context(), versioned.SnapshotName(s.UID, 2), metav1.DeleteOptions{}))
		r = e.runCmd(cmd, as)
		requireRefused(t, r, "archive-missing")
		require.NotContains(t, r.Stdout, "converged")
		after := e.getSecret("rst")
		require.Equal(t, live.ResourceVersion, after.ResourceVersion, "not written")
		require.Equal(t, vCanary("r1"), after.Data["k"])
	})
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// A stale SecretUpdate whose predecessor snapshot is a look-alike planted
// by another identity (right name, right source-resource-version, data that
// makes the live bytes match) exits non-zero and is not existing.
func TestIntegrationVersionedStalePlantedPredecessor(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("stale")
	s := e.createSecret(plainSecret("stale", map[string][]byte{"k": vCanary("s0")}))
	// Version 2 is written by hand (someone else): the command the planter
	// forges history for never ran.
	live := s.DeepCopy()
	live.Annotations = map[string]string{"keyledger.dev/version": "2"}
	live.Data = map[string][]byte{"k": vCanary("s1")}
	live, err := e.kube.Client().CoreV1().Secrets(e.ns).Update(t.Context(), live, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = e.planter().CoreV1().Secrets(e.ns).Create(t.Context(), lookalike(s, 1, map[string][]byte{"k": vCanary("s0")}), metav1.CreateOptions{})
	require.NoError(t, err)

	r := e.runCmd(updateCommand(e.ns, "stale", s.ResourceVersion, "mut-stale", map[string][]byte{"k": vCanary("s1")}), as)
	requireRefused(t, r, "stale-resource-version")
	require.Equal(t, live.ResourceVersion, e.getSecret("stale").ResourceVersion)
}

// A delete without history purges first; when the live delete is then
// refused, the refusal names the versions already purged.
func TestIntegrationVersionedPurgeThenRefusedNamesPurged(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("purged")
	s := e.createSecret(plainSecret("purged", map[string][]byte{"k": vCanary("p0")}))
	for i := 1; i <= 2; i++ {
		requireOK(t, e.update("purged", fmt.Sprint("mut-p", i), vCanary(fmt.Sprint("p", i)), as), "completed")
	}
	lift := e.denyDelete("purged")
	defer lift()
	live := e.getSecret("purged")
	r := e.runCmd(deleteCommand(e.ns, "purged", live.ResourceVersion, "mut-purge", false), as)
	require.Equal(t, 2, r.Code, "%s %s", r.Stdout, r.Stderr)
	out := outcome(t, r)
	require.Equal(t, []any{1.0, 2.0}, out["purgedVersions"], "the refusal says the history is gone: %s", r.Stdout)
	require.Empty(t, e.snapshotsOf(s.UID))
	require.Equal(t, live.ResourceVersion, e.getSecret("purged").ResourceVersion, "the live Secret stays")
}
