package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
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
	_, err := e.Planter().CoreV1().Secrets(e.NS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "shop"}},
		Type:       corev1.SecretTypeOpaque, Data: map[string][]byte{"password": known, "username": []byte("app")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	valkey := startServer(t, "valkey", "127.0.0.8", "", "wrong-password-from-an-old-run")
	pod := e.StatefulSet("shop-planted")
	first := e.PlayServerPod(ctx, pod, valkey, name, "", "password", true)

	server := map[string]any{"protocol": "valkey", "pod": pod, "port": valkey.Port, "secret": name, "passwordKey": "password"}
	plan := suite.CredentialPlan(e.NS, "mut-planted", []suite.PlanSecret{suite.StandardSecret(name)}, func(spec map[string]any) {
		spec["servers"] = []any{server}
	})
	r := e.Keyledger([]string{"run", e.WriteCommand("plan.json", plan)}, e.AsCredentialRunner(plan))
	out := suite.RequireRefused(t, r, credentials.ReasonSecretUnproven)
	require.Equal(t, pod, out["pod"])
	require.Equal(t, name, out["secret"])
	require.Equal(t, "unproven", out["authorship"], "the refusal says the Secret is unproven")
	now, err := e.Kube.Client().CoreV1().Pods(e.NS).Get(ctx, pod, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, first, now.UID, "no restart onto an unproven Secret")
	_, records := e.JournalOf("mut-planted:run-1")
	require.Empty(t, suite.RecordsOf(records, store.RecordAuthorityCall, "delete-pod"))
	require.Equal(t, known, e.GetSecret(name).Data["password"], "the planted Secret is kept")

	optIn := suite.CredentialPlan(e.NS, "mut-planted", []suite.PlanSecret{suite.StandardSecret(name)}, func(spec map[string]any) {
		spec["servers"] = []any{server}
		spec["repair"] = map[string]any{"restartOnUnproven": true}
	})
	r = e.Keyledger([]string{"run", e.WriteCommand("opt-in.json", optIn)}, e.AsCredentialRunner(optIn))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out = suite.Outcome(t, r)
	require.Equal(t, "mut-planted:run-2", out["run"], "the plan's next version")
	require.Equal(t, map[string]any{"planned": 1.0, "created": 0.0, "patched": 0.0, "existing": 1.0, "unchanged": 1.0, "unproven": 1.0}, out["secrets"])
	require.Equal(t, map[string]any{name: "unproven"}, out["authorship"])
	require.Equal(t, map[string]any{"accepted": 1.0, "repaired": 1.0, "skipped": 0.0}, out["servers"])
	require.Equal(t, []any{map[string]any{"pod": pod, "secret": name, "authorship": "unproven"}}, out["restarts"])
	require.Equal(t, known, e.GetSecret(name).Data["password"], "the planted Secret is kept")

	_, records = e.JournalOf("mut-planted:run-2")
	require.Equal(t, "unproven", readOf(t, records, name)["authorship"])
	deletes := suite.RecordsOf(records, store.RecordAuthorityCall, "delete-pod")
	require.Len(t, deletes, 1, "restarted exactly once")
	require.Equal(t, string(first), deletes[0].UID)
	require.Equal(t, name, workflowtest.Fields(deletes[0].Detail)["secret"])
	require.Equal(t, "unproven", workflowtest.Fields(deletes[0].Detail)["authorship"], "the restart's record says it followed an unproven Secret")
	suite.RequireNoValues(t, r.Stdout+r.Stderr+e.JournalText("mut-planted:run-1")+e.JournalText("mut-planted:run-2"), [][]byte{known})
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
	e.Adoptable(name, generator) // the Secret holds what the generator wrote last
	valkey := startServer(t, "valkey", "127.0.0.9", "", "the-password-before-the-rewrite")
	pod := e.StatefulSet("shop-incident")
	first := e.PlayServerPod(ctx, pod, valkey, name, "", "password", true)

	plan := suite.CredentialPlan(e.NS, "mut-incident", []suite.PlanSecret{suite.StandardSecret(name)}, func(spec map[string]any) {
		spec["adopt"] = []any{map[string]any{"externalSecret": name, "generators": []any{generator}}}
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": pod, "port": valkey.Port, "secret": name, "passwordKey": "password"}}
	})
	path := e.WriteCommand("plan.json", plan)
	as := e.AsCredentialRunner(plan)
	r := e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := suite.Outcome(t, r)
	require.Equal(t, map[string]any{"accepted": 1.0, "repaired": 1.0, "skipped": 0.0}, out["servers"])
	require.Equal(t, map[string]any{name: "adopted"}, out["authorship"])
	require.EqualValues(t, 0, out["secrets"].(map[string]any)["unproven"])
	require.Equal(t, []any{map[string]any{"pod": pod, "secret": name, "authorship": "adopted"}}, out["restarts"])
	require.Equal(t, []byte("CANARY-generated-by-eso-"+name), e.GetSecret(name).Data["password"], "the adopted value is kept")
	_, records := e.JournalOf("mut-incident:run-1")
	deletes := suite.RecordsOf(records, store.RecordAuthorityCall, "delete-pod")
	require.Len(t, deletes, 1, "restarted once")
	require.Equal(t, string(first), deletes[0].UID)
	require.Equal(t, "adopted", workflowtest.Fields(deletes[0].Detail)["authorship"])

	r = e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out = suite.Outcome(t, r)
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
	_, err := e.Planter().CoreV1().Secrets(e.NS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kept, Labels: map[string]string{"app.kubernetes.io/part-of": "shop"}},
		Type:       corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("CANARY-kept-0123456789"), "username": []byte("app")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.DenySecretCreate(rejected)
	plan := suite.CredentialPlan(e.NS, "mut-kept", []suite.PlanSecret{suite.StandardSecret(kept), suite.StandardSecret(rejected)})
	r := e.Keyledger([]string{"run", e.WriteCommand("plan.json", plan)}, e.AsCredentialRunner(plan))
	require.Equal(t, 2, r.Code, "%s %s", r.Stdout, r.Stderr)
	out := suite.Outcome(t, r)
	require.Nil(t, out["applied"], "keyledger wrote nothing: %s", r.Stdout)
	require.Nil(t, out["kept"], "the Secret found in place was never in a create: %s", r.Stdout)
	require.Equal(t, rejected, out["secret"], "the refusal names the one create sent")

	// A complete Secret held by a finalizer and being deleted is refused,
	// as one lacking something is.
	const held = "shop-held-app"
	e.CreateSecret(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: held, Labels: map[string]string{"app.kubernetes.io/part-of": "shop"}, Finalizers: []string{"example.com/hold"}},
		Type:       corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("CANARY-held-0123456789"), "username": []byte("app")},
	})
	require.NoError(t, e.Kube.Client().CoreV1().Secrets(e.NS).Delete(ctx, held, metav1.DeleteOptions{}))
	t.Cleanup(func() { e.RemoveFinalizers(held) })
	plan = suite.CredentialPlan(e.NS, "mut-held", []suite.PlanSecret{suite.StandardSecret(held)})
	suite.RequireRefused(t, e.Keyledger([]string{"run", e.WriteCommand("held.json", plan)}, e.AsCredentialRunner(plan)), "secret-terminating")

	// A complete Secret of another type than a create makes, not adopted,
	// is refused as one lacking something is.
	const typed = "shop-typed-app"
	e.CreateSecret(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: typed, Labels: map[string]string{"app.kubernetes.io/part-of": "shop"}},
		Type:       corev1.SecretTypeBasicAuth, Data: map[string][]byte{"password": []byte("CANARY-typed-0123456789"), "username": []byte("app")},
	})
	plan = suite.CredentialPlan(e.NS, "mut-typed", []suite.PlanSecret{suite.StandardSecret(typed)})
	suite.RequireRefused(t, e.Keyledger([]string{"run", e.WriteCommand("typed.json", plan)}, e.AsCredentialRunner(plan)), "secret-wrong-type")
}
