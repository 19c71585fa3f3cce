package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// journalCounts counts the journal's operations and records.
func journalCounts(e *env) [2]int {
	e.T.Helper()
	var n [2]int
	conn := suite.Connect(e.T, e.Journal.OwnerURL)
	require.NoError(e.T, conn.QueryRow(e.T.Context(),
		`SELECT (SELECT count(*) FROM keyledger.operations), (SELECT count(*) FROM keyledger.records)`).Scan(&n[0], &n[1]))
	return n
}

// planThenRun plans path, proves the plan wrote nothing (watch history and
// journal), runs it, and proves the run wrote exactly what the plan said.
func planThenRun(e *env, path string, as ...suite.RunOption) suite.PlanOutput {
	e.T.Helper()
	journal, from := journalCounts(e), e.SecretsRV()
	p := e.Plan(path, as...)
	require.Zero(e.T, p.Writes)
	require.Empty(e.T, e.SecretEvents(from), "plan wrote to the API server")
	require.Equal(e.T, journal, journalCounts(e), "plan wrote to the journal")

	from = e.SecretsRV()
	r := e.Keyledger([]string{"run", path}, as...)
	require.Equal(e.T, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(e.T, p.Outcome, suite.Outcome(e.T, r)["outcome"], "plan said how the run would end")
	require.Equal(e.T, p.Planned(), e.SecretEvents(from), "the run wrote exactly what plan said")

	// Planned again: the journal says the operation ended, so a run would
	// replay it (or, for a desired-state command, converge with no write).
	again := e.Plan(path, as...)
	require.Empty(e.T, again.Planned(), "nothing left to write: %+v", again)
	if again.Replay {
		require.Empty(e.T, again.Calls)
	}
	return p
}

// A credential plan: plan says "would create A, patch B" (the keys it adds,
// never values), writes nothing, and the run then does exactly that.
func TestIntegrationPlanCredentials(t *testing.T) {
	t.Parallel()
	e := setup(t)
	existing := e.CreateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-b"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte("CANARY-plan-existing-0123456789")}})
	secretB := suite.StandardSecret(existing.Name)
	secretB.Keys = append(secretB.Keys, suite.Generated("admin-password", 24, "alphanumeric"))
	plan := suite.CredentialPlan(e.NS, "mut-plan-creds", []suite.PlanSecret{suite.StandardSecret("shop-a"), secretB})
	path := e.WriteCommand("plan.json", plan)

	p := planThenRun(e, path, e.AsCredentialRunner(plan))
	require.Equal(t, "new", p.Journal)
	require.Equal(t, "mut-plan-creds:run-1", p.Operation, "a credential plan's first run")
	require.Equal(t, []string{"ADDED secret/shop-a", "MODIFIED secret/shop-b"}, p.Planned())
	require.Equal(t, "completed", p.Outcome)
	require.Len(t, p.Calls, 2, "create A; patch B, read in place and never POSTed")
	require.Equal(t, []string{"create", "patch"}, []string{p.Calls[0].Verb, p.Calls[1].Verb})
	require.Equal(t, []int{1, 2}, []int{p.Calls[0].Batch, p.Calls[1].Batch})
	for _, c := range p.Calls {
		require.False(t, c.Final, "a credential plan has no final call: %s", c.Step)
	}
	for _, c := range p.Calls {
		if c.Verb == "patch" {
			require.Equal(t, []any{"username", "admin-password"}, c.Detail["addKeys"], "the keys it adds")
		}
	}
	out, err := json.Marshal(p)
	require.NoError(t, err)
	suite.RequireNoValues(t, string(out), e.SecretValues("shop-a", "shop-b"))
}

// A key retirement: plan says "would update the keyring", the run does.
func TestIntegrationPlanRetirement(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.CreateSecret(suite.KeyringSecret("keyring", suite.StandardKeyring()))
	path := e.WriteCommand("retire.json", suite.RetireCommand(s, "k-2026-07", "mut-plan-retire"))
	p := planThenRun(e, path, e.AsRetirerOf(s))
	require.Equal(t, []string{"MODIFIED secret/keyring"}, p.Planned())
	require.Equal(t, "completed", p.Outcome)

	// Retiring the active key: plan says the run would refuse, and sends nothing.
	refused := e.Plan(e.WriteCommand("active.json", suite.RetireCommand(e.GetSecret("keyring"), "k-2026-08", "mut-plan-active")), e.AsRetirerOf(s))
	require.Equal(t, "refused", refused.Outcome)
	require.Equal(t, "key-active", refused.Reason)
	require.Empty(t, refused.Calls)
}

// A versioned update: plan names the snapshot it would create and the
// live Secret it would replace; at the retention limit also the snapshot it
// would prune; for a delete without history every snapshot delete and the
// live delete. The runs do exactly that.
func TestIntegrationPlanVersionedUpdate(t *testing.T) {
	t.Parallel()
	e := setup(t)
	live := e.CreateSecret(suite.PlainSecret("db", map[string][]byte{"password": suite.VCanary("v1")}))
	as := suite.AsKubeconfig(e.ServiceAccountKubeconfig("writer-db", suite.VersionedRules("db")))
	path := e.WriteCommand("update.json", suite.UpdateCommand(e.NS, "db", live.ResourceVersion, "mut-plan-update", map[string][]byte{"password": suite.VCanary("v2")}))
	p := planThenRun(e, path, as)
	require.Len(t, p.Calls, 2, "%+v", p.Calls)
	require.Equal(t, "create", p.Calls[0].Verb)
	require.Equal(t, "update", p.Calls[1].Verb)
	require.Equal(t, "secret/db", p.Calls[1].Target)
	require.Equal(t, []int{1, 2}, []int{p.Calls[0].Batch, p.Calls[1].Batch})
	require.Equal(t, []bool{false, true}, []bool{p.Calls[0].Final, p.Calls[1].Final}, "the live write is the final call")
	require.Equal(t, "completed", p.Outcome)

	// With one snapshot retained, the next update archives version 2 and
	// prunes version 1 before the live write.
	v2 := e.GetSecret("db")
	path = e.WriteCommand("update-2.json", suite.UpdateCommand(e.NS, "db", v2.ResourceVersion, "mut-plan-update-2", map[string][]byte{"password": suite.VCanary("v3")}))
	p = planThenRun(e, path, as, suite.WithEnv("KEYLEDGER_HISTORY_LIMIT=1"))
	require.Len(t, p.Calls, 3, "%+v", p.Calls)
	require.Equal(t, []string{"create-snapshot", "prune-snapshot", "replace-live"}, []string{p.Calls[0].Step, p.Calls[1].Step, p.Calls[2].Step})
	require.Contains(t, p.Planned(), "DELETED "+p.Calls[1].Target)
	require.True(t, strings.HasSuffix(p.Calls[1].Target, "-v1"), "the pruned snapshot is version 1's: %s", p.Calls[1].Target)

	// A delete without history: plan lists the snapshot delete and the live
	// delete (each counted as done once planned) and ends "deleted", as the
	// run does.
	v3 := e.GetSecret("db")
	path = e.WriteCommand("delete.json", suite.DeleteCommand(e.NS, "db", v3.ResourceVersion, "mut-plan-delete", false))
	p = planThenRun(e, path, as)
	require.Equal(t, []string{"delete-snapshot", "delete-live"}, []string{p.Calls[0].Step, p.Calls[1].Step}, "%+v", p.Calls)
	require.Equal(t, "deleted", p.Outcome)
}

// A credential plan that adopts an External Secrets leftover: plan lists
// the ExternalSecret it would delete (Orphan), the generator and the
// Secret patch, writes nothing, and the run then does exactly that.
func TestIntegrationPlanCredentialsAdoption(t *testing.T) {
	t.Parallel()
	e := setup(t)
	suite.InstallExternalSecretsCRDs(t)
	ctx, dyn := t.Context(), e.DynamicClient()
	ess, passwords := dyn.Resource(suite.ExternalSecretsGVR).Namespace(e.NS), dyn.Resource(suite.PasswordsGVR).Namespace(e.NS)
	const name, generator = "shop-orders-cache-app", "shop-orders-cache-password"
	_, err := passwords.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password",
		"metadata": map[string]any{"name": generator}, "spec": map[string]any{"length": int64(32)},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	es, err := ess.Create(ctx, suite.GeneratorBackedExternalSecret(name, generator), metav1.CreateOptions{})
	require.NoError(t, err)
	yes := true
	e.CreateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"app.kubernetes.io/instance": "shop"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "external-secrets.io/v1", Kind: "ExternalSecret", Name: name,
			UID: es.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}},
		Data: map[string][]byte{"password": []byte("CANARY-plan-adopt-0123456789")}})
	plan := suite.CredentialPlan(e.NS, "mut-plan-adopt", []suite.PlanSecret{suite.StandardSecret(name)}, func(spec map[string]any) {
		spec["adopt"] = []any{map[string]any{"externalSecret": name, "generators": []any{generator}}}
	})
	path := e.WriteCommand("plan.json", plan)
	as := e.AsCredentialRunner(plan)

	journal, from := journalCounts(e), e.SecretsRV()
	p := e.Plan(path, as)
	require.Empty(t, p.Stopped)
	require.Empty(t, e.SecretEvents(from), "plan wrote to the API server")
	require.Equal(t, journal, journalCounts(e), "plan wrote to the journal")
	_, err = ess.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "plan deleted nothing")
	var steps []string
	for _, c := range p.Calls {
		steps = append(steps, c.Verb+" "+c.Step+" "+c.Target)
	}
	require.Contains(t, steps, "delete orphan-external-secret externalsecret/"+name)
	require.Contains(t, steps, "delete delete-generator password/"+generator)

	r := e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, p.Outcome, suite.Outcome(t, r)["outcome"])
	_, records := e.JournalOf("mut-plan-adopt:run-1")
	var ran []string
	for _, c := range records {
		if c.Kind == store.RecordAuthorityCall {
			ran = append(ran, c.Step+" "+c.Target.String())
		}
	}
	var planned []string
	for _, c := range p.Calls {
		planned = append(planned, c.Step+" "+c.Target)
	}
	require.Equal(t, planned, ran, "the run sent the calls plan listed, in order")
}

// A credential plan with a server lists the pod a run would probe and
// never contacts it: whether the run then restarts the pod depends on the
// server's answer, which only a run asks for.
func TestIntegrationPlanCredentialsProbesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.7:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var dialed atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			c.Close()
		}
	}()
	pod := e.StatefulSet("shop-probed")
	// A stand-in kubelet: the pod's IP must be a loopback address whose
	// listener counts dials, which a real pod cannot be.
	_, err = e.Kube.PlayKubelet(t.Context(), e.NS, pod, "127.0.0.7")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	plan := suite.CredentialPlan(e.NS, "mut-plan-probe", []suite.PlanSecret{suite.StandardSecret("shop-probed-app")}, func(spec map[string]any) {
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": pod, "port": port, "secret": "shop-probed-app", "passwordKey": "password"}}
	})
	journal, from := journalCounts(e), e.SecretsRV()
	p := e.Plan(e.WriteCommand("plan.json", plan), e.AsCredentialRunner(plan))
	require.Empty(t, e.SecretEvents(from), "plan wrote to the API server")
	require.Equal(t, journal, journalCounts(e), "plan wrote to the journal")
	require.Zero(t, dialed.Load(), "plan never contacts a server")
	require.Equal(t, []string{"ADDED secret/shop-probed-app"}, p.Planned())
	var probes []string
	for _, r := range p.Reads {
		if r["kind"] == "probe" {
			probes = append(probes, fmt.Sprintf("%s %s", r["target"], r["status"]))
		}
	}
	require.Equal(t, []string{"pod/" + pod + " planned"}, probes)
}
