package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/credentials"
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
