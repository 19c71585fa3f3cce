package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// A plan is desired state: each run of the same plan file is an operation of
// its own and converges again. A deleted Secret is recreated (and only it),
// a server refusing its Secret's password is repaired once, and a run with
// nothing to do writes nothing; the journal lists every run under the plan.
func TestIntegrationCredentialsConverge(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	names := []string{"shop-orders-cache-app", "shop-bus-users", "shop-bucket"}
	valkey := startServer(t, "valkey", "127.0.0.6", "", "stale-password-the-server-started-with")
	pod := "shop-orders-cache-0"
	plan := suite.CredentialPlan(e.NS, "mut-converge", []suite.PlanSecret{suite.StandardSecret(names[0]), suite.StandardSecret(names[1]), suite.StandardSecret(names[2])},
		func(spec map[string]any) {
			spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": pod, "port": valkey.Port, "secret": names[0], "passwordKey": "password"}}
		})
	path := e.WriteCommand("plan.json", plan)
	as := e.AsCredentialRunner(plan)
	from := e.SecretsRV()
	run := func(n int, want string) map[string]any {
		t.Helper()
		r := e.Keyledger([]string{"run", path}, as)
		require.Equal(t, 0, r.Code, "run %d: stdout %s stderr %s", n, r.Stdout, r.Stderr)
		out := suite.Outcome(t, r)
		require.Equal(t, want, out["outcome"], "run %d", n)
		require.Equal(t, "mut-converge", out["mutationId"])
		require.Equal(t, fmt.Sprintf("mut-converge:run-%d", n), out["run"], "run %d is an operation of its own", n)
		suite.RequireNoValues(t, r.Stdout+r.Stderr, e.SecretValues(names...))
		return out
	}
	rvs := func() map[string]string {
		out := map[string]string{}
		for _, n := range names {
			out[n] = e.GetSecret(n).ResourceVersion
		}
		return out
	}

	// Run 1 creates every Secret (the server's pod does not exist yet).
	out := run(1, "completed")
	require.EqualValues(t, 3, out["secrets"].(map[string]any)["created"])
	first := rvs()
	firstUID := e.GetSecret(names[1]).UID

	// Run 2, after one Secret was deleted by hand: it is recreated with a
	// new value, and no other Secret is written.
	oldValue := e.GetSecret(names[1]).Data["password"]
	require.NoError(t, e.Kube.Client().CoreV1().Secrets(e.NS).Delete(ctx, names[1], metav1.DeleteOptions{}))
	out = run(2, "completed")
	require.Equal(t, map[string]any{"planned": 3.0, "created": 1.0, "patched": 0.0, "existing": 2.0, "unchanged": 2.0, "unproven": 0.0}, out["secrets"])
	second := rvs()
	require.Equal(t, first[names[0]], second[names[0]], "not written")
	require.Equal(t, first[names[2]], second[names[2]], "not written")
	recreated := e.GetSecret(names[1])
	require.NotEqual(t, firstUID, recreated.UID, "recreated")
	require.NotEqual(t, oldValue, recreated.Data["password"], "with a new value")
	require.Equal(t, "mut-converge:run-2", recreated.Annotations["keyledger.dev/created-by-mutation"])

	// Run 3, with a server whose pod runs with a password its Secret does
	// not hold: the pod is deleted once and its replacement accepts.
	e.StatefulSet("shop-orders-cache")
	stale := e.PlayServerPod(ctx, pod, valkey, names[0], "", "password", true)
	out = run(3, "completed")
	require.Equal(t, map[string]any{"accepted": 1.0, "repaired": 1.0, "skipped": 0.0}, out["servers"])
	_, records := e.JournalOf("mut-converge:run-3")
	deletes := suite.RecordsOf(records, store.RecordAuthorityCall, "delete-pod")
	require.Len(t, deletes, 1, "deleted once")
	require.Equal(t, string(stale), deletes[0].UID)
	replacement, err := e.Kube.Client().CoreV1().Pods(e.NS).Get(ctx, pod, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, stale, replacement.UID)
	require.Equal(t, second, rvs(), "repairing a server writes no Secret")

	// Run 4 has nothing to do: it writes nothing and restarts nothing.
	out = run(4, "existing")
	require.Equal(t, map[string]any{"accepted": 1.0, "repaired": 0.0, "skipped": 0.0}, out["servers"])
	require.Equal(t, second, rvs(), "run 4 writes no Secret")
	now, err := e.Kube.Client().CoreV1().Pods(e.NS).Get(ctx, pod, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, replacement.UID, now.UID, "run 4 restarts nothing")
	_, records = e.JournalOf("mut-converge:run-4")
	for _, r := range suite.RecordsOf(records, store.RecordAuthorityResult, "") {
		require.NotEqual(t, store.Status("applied"), r.Status, "run 4 applied %s %s", r.Step, r.Target)
	}

	// The API server's own history: the deleted Secret was created twice
	// (runs 1 and 2), every other one once.
	creates := e.SecretCreates(from)
	require.Equal(t, 1, creates[names[0]])
	require.Equal(t, 2, creates[names[1]])
	require.Equal(t, 1, creates[names[2]])

	// The journal: four runs of one plan, each an operation, listed together.
	runs := e.RunsOf("mut-converge")
	require.Len(t, runs, 4)
	for i, op := range runs {
		require.Equal(t, fmt.Sprintf("mut-converge:run-%d", i+1), op.MutationID)
		require.Equal(t, store.StateCompleted, op.State)
	}
	list := e.Keyledger([]string{"journal", "list"})
	require.Equal(t, 0, list.Code, list.Stderr)
	var rows []string
	for _, line := range strings.Split(list.Stdout, "\n") {
		if strings.HasPrefix(line, "mut-converge ") {
			rows = append(rows, strings.Fields(line)[1])
		}
	}
	require.Equal(t, []string{"4", "3", "2", "1"}, rows, "every run listed under the plan, newest first: %s", list.Stdout)
	show := e.Keyledger([]string{"journal", "show", "mut-converge", "-o", "json"})
	require.Equal(t, 0, show.Code, show.Stderr)
	var shown []map[string]any
	require.NoError(t, json.Unmarshal([]byte(show.Stdout), &shown))
	require.Len(t, shown, 4)
	require.Equal(t, "mut-converge", shown[0]["plan"])
	require.EqualValues(t, 4, shown[0]["run"], "journal show lists a plan's runs newest first")
	require.EqualValues(t, 1, shown[3]["run"])
	suite.RequireNoValues(t, list.Stdout+show.Stdout, e.SecretValues(names...))
}

// Eight runs of one plan at once: every Secret is created once (the API
// server's watch history), every run exits 0, and they drive one operation
// (or, for a late one, a later run that finds everything in place).
func TestIntegrationCredentialsConcurrentRuns(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var secrets []suite.PlanSecret
	var names []string
	for i := range 6 {
		names = append(names, fmt.Sprintf("concurrent-%d", i))
		secrets = append(secrets, suite.StandardSecret(names[i]))
	}
	plan := suite.CredentialPlan(e.NS, "mut-concurrent", secrets)
	path := e.WriteCommand("plan.json", plan)
	as := e.AsCredentialRunner(plan)
	from := e.SecretsRV()
	const n = 8
	results := make([]suite.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.Keyledger([]string{"run", path}, as)
		}()
	}
	wg.Wait()
	outcomes := map[string]int{}
	for i, r := range results {
		require.Equal(t, 0, r.Code, "run %d: stdout %s stderr %s", i, r.Stdout, r.Stderr)
		outcomes[suite.Outcome(t, r)["outcome"].(string)]++
	}
	t.Logf("outcomes of %d concurrent runs: %v", n, outcomes)
	for name, c := range e.SecretCreates(from) {
		require.Equal(t, 1, c, "%s created once", name)
	}
	for _, name := range names {
		s := e.GetSecret(name)
		require.Len(t, s.Data["password"], 32)
	}
	created := 0
	for _, op := range e.RunsOf("mut-concurrent") {
		require.Equal(t, store.StateCompleted, op.State, op.MutationID)
		_, records := e.JournalOf(op.MutationID)
		for _, r := range records {
			if r.Step == "create-secret" && (r.Kind == store.RecordAuthorityResult && r.Status == "applied" ||
				r.Kind == store.RecordResolution && r.Reason == "created-by-this-mutation") {
				created++
			}
		}
	}
	require.Equal(t, len(names), created, "the journal says each Secret was created once")
}

// The same mutationId with another plan of the same owner is that plan's
// next version (run 3 creates what it adds); with another owner it is
// refused, however many runs the first plan had, and nothing is written.
func TestIntegrationCredentialsMutationIDReused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	plan := suite.CredentialPlan(e.NS, "mut-reused", []suite.PlanSecret{suite.StandardSecret("reused-a")})
	path := e.WriteCommand("plan.json", plan)
	as := e.AsCredentialRunner(plan)
	for range 2 {
		r := e.Keyledger([]string{"run", path}, as)
		require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	}
	next := suite.CredentialPlan(e.NS, "mut-reused", []suite.PlanSecret{suite.StandardSecret("reused-a"), suite.StandardSecret("reused-b")})
	r := e.Keyledger([]string{"run", e.WriteCommand("next.json", next)}, e.AsCredentialRunner(next))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "mut-reused:run-3", suite.Outcome(t, r)["run"], "the plan's next version")
	e.GetSecret("reused-b")

	other := suite.CredentialPlan(e.NS, "mut-reused", []suite.PlanSecret{suite.StandardSecret("reused-c")}, func(spec map[string]any) { spec["owner"] = "another-owner" })
	r = e.Keyledger([]string{"run", e.WriteCommand("other.json", other)}, e.AsCredentialRunner(other))
	require.Equal(t, 2, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "mutation-id-reused", suite.Outcome(t, r)["reason"])
	_, err := e.Kube.Client().CoreV1().Secrets(e.NS).Get(t.Context(), "reused-c", metav1.GetOptions{})
	require.Error(t, err, "nothing written")
	require.Len(t, e.RunsOf("mut-reused"), 3, "no run journaled for the other owner")
}
