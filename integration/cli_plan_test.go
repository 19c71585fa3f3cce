package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/keyledger/keyledger/store"
)

// planOutput is what the tests read of `keyledger plan -o json`.
type planOutput struct {
	Operation string `json:"operation"`
	Journal   string `json:"journal"`
	Replay    bool   `json:"replay"`
	Calls     []struct {
		Answer string         `json:"answer"`
		Batch  int            `json:"batch"`
		Final  bool           `json:"final"`
		Verb   string         `json:"verb"`
		Step   string         `json:"step"`
		Target string         `json:"target"`
		Detail map[string]any `json:"detail"`
	} `json:"calls"`
	Reads   []map[string]any `json:"reads"`
	Outcome string           `json:"outcome"`
	Reason  string           `json:"reason"`
	Stopped string           `json:"stopped"`
	Writes  int              `json:"writes"`
}

// plan runs `keyledger plan -o json FILE` and decodes its output.
func (e *env) plan(path string, opts ...runOption) planOutput {
	e.t.Helper()
	r := e.keyledger([]string{"plan", "-o", "json", path}, opts...)
	require.Equal(e.t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	var p planOutput
	require.NoError(e.t, json.Unmarshal([]byte(r.Stdout), &p), "stdout %s", r.Stdout)
	return p
}

// planned lists the writes of a plan's calls (those it expects applied)
// as "TYPE kind/name", the form secretEvents uses: create is ADDED, update
// and patch MODIFIED, delete DELETED.
func (p planOutput) planned() []string {
	event := map[string]string{"create": "ADDED", "update": "MODIFIED", "patch": "MODIFIED", "delete": "DELETED"}
	out := []string{}
	for _, c := range p.Calls {
		if c.Answer != "applied" {
			continue
		}
		out = append(out, event[c.Verb]+" "+c.Target)
	}
	sort.Strings(out)
	return out
}

// secretEvents returns the writes the API server made to the namespace's
// Secrets after resourceVersion from, as "TYPE secret/NAME", read from its
// watch history: it writes a marker Secret and collects every event up to
// the marker's creation (excluded).
func (e *env) secretEvents(from string) []string {
	e.t.Helper()
	marker := e.createSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "marker-" + randomSuffix(e.t)}})
	ctx, cancel := context.WithTimeout(e.t.Context(), 20*time.Second)
	defer cancel()
	w, err := e.kube.Client().CoreV1().Secrets(e.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: from})
	require.NoError(e.t, err)
	defer w.Stop()
	out := []string{}
	for {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(e.t, ok, "watch closed before the marker")
			require.NotEqual(e.t, watch.Error, ev.Type, "watch error: %v", ev.Object)
			if ev.Type == watch.Bookmark {
				continue
			}
			m, err := meta.Accessor(ev.Object)
			require.NoError(e.t, err)
			if m.GetUID() == marker.UID {
				sort.Strings(out)
				return out
			}
			out = append(out, fmt.Sprintf("%s secret/%s", ev.Type, m.GetName()))
		case <-ctx.Done():
			e.t.Fatalf("the marker Secret never appeared in the watch history after %s", from)
		}
	}
}

// journalCounts counts the journal's operations and records.
func (e *env) journalCounts() [2]int {
	e.t.Helper()
	var n [2]int
	conn := connect(e.t, e.journal.OwnerURL)
	require.NoError(e.t, conn.QueryRow(e.t.Context(),
		`SELECT (SELECT count(*) FROM keyledger.operations), (SELECT count(*) FROM keyledger.records)`).Scan(&n[0], &n[1]))
	return n
}

// planThenRun plans path, proves the plan wrote nothing (watch history and
// journal), runs it, and proves the run wrote exactly what the plan said.
func (e *env) planThenRun(path string, as ...runOption) planOutput {
	e.t.Helper()
	journal, from := e.journalCounts(), e.secretsRV()
	p := e.plan(path, as...)
	require.Zero(e.t, p.Writes)
	require.Empty(e.t, e.secretEvents(from), "plan wrote to the API server")
	require.Equal(e.t, journal, e.journalCounts(), "plan wrote to the journal")

	from = e.secretsRV()
	r := e.keyledger([]string{"run", path}, as...)
	require.Equal(e.t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(e.t, p.Outcome, outcome(e.t, r)["outcome"], "plan said how the run would end")
	require.Equal(e.t, p.planned(), e.secretEvents(from), "the run wrote exactly what plan said")

	// Planned again: the journal says the operation ended, so a run would
	// replay it (or, for a desired-state command, converge with no write).
	again := e.plan(path, as...)
	require.Empty(e.t, again.planned(), "nothing left to write: %+v", again)
	if again.Replay {
		require.Empty(e.t, again.Calls)
	}
	return p
}

// A credential plan: plan says "would create A, patch B" (the keys it adds,
// never values), writes nothing, and the run then does exactly that.
func TestIntegrationPlanCredentials(t *testing.T) {
	t.Parallel()
	e := setup(t)
	existing := e.createSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-b"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte("CANARY-plan-existing-0123456789")}})
	secretB := standardSecret(existing.Name)
	secretB.keys = append(secretB.keys, generated("admin-password", 24, "alphanumeric"))
	plan := credentialPlan(e.ns, "mut-plan-creds", []planSecret{standardSecret("shop-a"), secretB})
	path := e.writeCommand("plan.json", plan)

	p := e.planThenRun(path, e.asCredentialRunner(plan))
	require.Equal(t, "new", p.Journal)
	require.Equal(t, "mut-plan-creds:run-1", p.Operation, "a credential plan's first run")
	require.Equal(t, []string{"ADDED secret/shop-a", "MODIFIED secret/shop-b"}, p.planned())
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
	requireNoValues(t, string(out), e.secretValues("shop-a", "shop-b"))
}

// A key retirement: plan says "would update the keyring", the run does.
func TestIntegrationPlanRetirement(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.createSecret(keyringSecret("keyring", standardKeyring()))
	path := e.writeCommand("retire.json", retireCommand(s, "k-2026-07", "mut-plan-retire"))
	p := e.planThenRun(path, e.asRetirerOf(s))
	require.Equal(t, []string{"MODIFIED secret/keyring"}, p.planned())
	require.Equal(t, "completed", p.Outcome)

	// Retiring the active key: plan says the run would refuse, and sends nothing.
	refused := e.plan(e.writeCommand("active.json", retireCommand(e.getSecret("keyring"), "k-2026-08", "mut-plan-active")), e.asRetirerOf(s))
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
	live := e.createSecret(plainSecret("db", map[string][]byte{"password": vCanary("v1")}))
	as := asKubeconfig(e.serviceAccountKubeconfig("writer-db", versionedRules("db")))
	path := e.writeCommand("update.json", updateCommand(e.ns, "db", live.ResourceVersion, "mut-plan-update", map[string][]byte{"password": vCanary("v2")}))
	p := e.planThenRun(path, as)
	require.Len(t, p.Calls, 2, "%+v", p.Calls)
	require.Equal(t, "create", p.Calls[0].Verb)
	require.Equal(t, "update", p.Calls[1].Verb)
	require.Equal(t, "secret/db", p.Calls[1].Target)
	require.Equal(t, []int{1, 2}, []int{p.Calls[0].Batch, p.Calls[1].Batch})
	require.Equal(t, []bool{false, true}, []bool{p.Calls[0].Final, p.Calls[1].Final}, "the live write is the final call")
	require.Equal(t, "completed", p.Outcome)

	// With one snapshot retained, the next update archives version 2 and
	// prunes version 1 before the live write.
	v2 := e.getSecret("db")
	path = e.writeCommand("update-2.json", updateCommand(e.ns, "db", v2.ResourceVersion, "mut-plan-update-2", map[string][]byte{"password": vCanary("v3")}))
	p = e.planThenRun(path, as, withEnv("KEYLEDGER_HISTORY_LIMIT=1"))
	require.Len(t, p.Calls, 3, "%+v", p.Calls)
	require.Equal(t, []string{"create-snapshot", "prune-snapshot", "replace-live"}, []string{p.Calls[0].Step, p.Calls[1].Step, p.Calls[2].Step})
	require.Contains(t, p.planned(), "DELETED "+p.Calls[1].Target)
	require.True(t, strings.HasSuffix(p.Calls[1].Target, "-v1"), "the pruned snapshot is version 1's: %s", p.Calls[1].Target)

	// A delete without history: plan lists the snapshot delete and the live
	// delete (each counted as done once planned) and ends "deleted", as the
	// run does.
	v3 := e.getSecret("db")
	path = e.writeCommand("delete.json", deleteCommand(e.ns, "db", v3.ResourceVersion, "mut-plan-delete", false))
	p = e.planThenRun(path, as)
	require.Equal(t, []string{"delete-snapshot", "delete-live"}, []string{p.Calls[0].Step, p.Calls[1].Step}, "%+v", p.Calls)
	require.Equal(t, "deleted", p.Outcome)
}

// A credential plan that adopts an External Secrets leftover: plan lists
// the ExternalSecret it would delete (Orphan), the generator and the
// Secret patch, writes nothing, and the run then does exactly that.
func TestIntegrationPlanCredentialsAdoption(t *testing.T) {
	t.Parallel()
	e := setup(t)
	installExternalSecretsCRDs(t)
	ctx, dyn := t.Context(), e.dynamicClient()
	ess, passwords := dyn.Resource(externalSecretsGVR).Namespace(e.ns), dyn.Resource(passwordsGVR).Namespace(e.ns)
	const name, generator = "shop-orders-cache-app", "shop-orders-cache-password"
	_, err := passwords.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password",
		"metadata": map[string]any{"name": generator}, "spec": map[string]any{"length": int64(32)},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	es, err := ess.Create(ctx, generatorBackedExternalSecret(name, generator), metav1.CreateOptions{})
	require.NoError(t, err)
	yes := true
	e.createSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"app.kubernetes.io/instance": "shop"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "external-secrets.io/v1", Kind: "ExternalSecret", Name: name,
			UID: es.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}},
		Data: map[string][]byte{"password": []byte("CANARY-plan-adopt-0123456789")}})
	plan := credentialPlan(e.ns, "mut-plan-adopt", []planSecret{standardSecret(name)}, func(spec map[string]any) {
		spec["adopt"] = []any{map[string]any{"externalSecret": name, "generators": []any{generator}}}
	})
	path := e.writeCommand("plan.json", plan)
	as := e.asCredentialRunner(plan)

	journal, from := e.journalCounts(), e.secretsRV()
	p := e.plan(path, as)
	require.Empty(t, p.Stopped)
	require.Empty(t, e.secretEvents(from), "plan wrote to the API server")
	require.Equal(t, journal, e.journalCounts(), "plan wrote to the journal")
	_, err = ess.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "plan deleted nothing")
	var steps []string
	for _, c := range p.Calls {
		steps = append(steps, c.Verb+" "+c.Step+" "+c.Target)
	}
	require.Contains(t, steps, "delete orphan-external-secret externalsecret/"+name)
	require.Contains(t, steps, "delete delete-generator password/"+generator)

	r := e.keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, p.Outcome, outcome(t, r)["outcome"])
	_, records := e.journalOf("mut-plan-adopt:run-1")
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
	pod := e.statefulSet("shop-probed")
	// A stand-in kubelet: the pod's IP must be a loopback address whose
	// listener counts dials, which a real pod cannot be.
	_, err = e.kube.PlayKubelet(t.Context(), e.ns, pod, "127.0.0.7")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	plan := credentialPlan(e.ns, "mut-plan-probe", []planSecret{standardSecret("shop-probed-app")}, func(spec map[string]any) {
		spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": pod, "port": port, "secret": "shop-probed-app", "passwordKey": "password"}}
	})
	journal, from := e.journalCounts(), e.secretsRV()
	p := e.plan(e.writeCommand("plan.json", plan), e.asCredentialRunner(plan))
	require.Empty(t, e.secretEvents(from), "plan wrote to the API server")
	require.Equal(t, journal, e.journalCounts(), "plan wrote to the journal")
	require.Zero(t, dialed.Load(), "plan never contacts a server")
	require.Equal(t, []string{"ADDED secret/shop-probed-app"}, p.planned())
	var probes []string
	for _, r := range p.Reads {
		if r["kind"] == "probe" {
			probes = append(probes, fmt.Sprintf("%s %s", r["target"], r["status"]))
		}
	}
	require.Equal(t, []string{"pod/" + pod + " planned"}, probes)
}
