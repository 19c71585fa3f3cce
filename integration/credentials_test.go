package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

func TestIntegrationCredentialsFreshThenRerun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	names := []string{"shop-orders-cache-app", "shop-bus-users", "shop-bucket"}
	secrets := []suite.PlanSecret{suite.StandardSecret(names[0]), suite.StandardSecret(names[1]),
		{Name: names[2], Keys: []map[string]any{suite.Generated("access-key", 20, "hex"), suite.Generated("secret-key", 64, "base64url")}}}
	plan := suite.CredentialPlan(e.NS, "mut-fresh", secrets)
	path := e.WriteCommand("plan.json", plan)
	as := e.AsCredentialRunner(plan)
	from := e.SecretsRV()

	r := e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := suite.Outcome(t, r)
	require.Equal(t, "completed", out["outcome"])
	require.Equal(t, "CredentialPlan", out["kind"])
	require.Equal(t, map[string]any{"planned": 3.0, "created": 3.0, "patched": 0.0, "existing": 0.0, "unchanged": 0.0, "unproven": 0.0}, out["secrets"])
	require.Equal(t, "mut-fresh:run-1", out["run"])
	require.Equal(t, 3, suite.APIRequests(t, r)["POST secrets"], "one create per absent Secret")
	require.Equal(t, 3, suite.APIRequests(t, r)["GET secrets"], "each read (absent) before it is created")

	before := map[string]*corev1.Secret{}
	for _, n := range names {
		s := e.GetSecret(n)
		before[n] = s
		require.Equal(t, 1, e.SecretWrites(n, from, s.ResourceVersion), "%s written once", n)
		require.Equal(t, "mut-fresh:run-1", s.Annotations["keyledger.dev/created-by-mutation"])
		require.Equal(t, corev1.SecretTypeOpaque, s.Type)
	}
	suite.RequireAlphabet(t, before[names[0]].Data["password"], 32, suite.AlphanumericChars)
	require.Equal(t, "app", string(before[names[0]].Data["username"]))
	require.Equal(t, "shop", before[names[0]].Labels["app.kubernetes.io/part-of"])
	suite.RequireAlphabet(t, before[names[2]].Data["access-key"], 20, "0123456789abcdef")
	suite.RequireAlphabet(t, before[names[2]].Data["secret-key"], 64, suite.AlphanumericChars+"-_")
	require.NotEqual(t, before[names[0]].Data["password"], before[names[1]].Data["password"])

	// The journal: preparation with names, one call and result per create.
	op, records := e.JournalOf("mut-fresh:run-1")
	require.Equal(t, store.StateCompleted, op.State)
	require.Equal(t, "shop-orders-cache", op.Name)
	prep := records[0]
	require.Equal(t, store.RecordPreparation, prep.Kind)
	require.Equal(t, []any{names[0], names[1], names[2]}, workflowtest.Fields(prep.Detail)["secrets"])
	require.Equal(t, op.CommandDigest, workflowtest.Fields(prep.Detail)["planDigest"])
	calls := suite.RecordsOf(records, store.RecordAuthorityCall, "create-secret")
	require.Len(t, calls, 3)
	for i, c := range calls {
		require.Equal(t, "secret/"+names[i], c.Target.String())
	}
	require.Len(t, suite.RecordsOf(records, store.RecordAuthorityResult, "create-secret"), 3)
	values := e.SecretValues(names...)
	suite.RequireNoValues(t, r.Stdout+r.Stderr+e.JournalText("mut-fresh:run-1"), values)

	// The same plan again: a plan is desired state, so this is run 2, a new
	// operation that reads the cluster again (a GET per Secret, never a POST)
	// and writes nothing.
	r = e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, r.Stderr)
	out = suite.Outcome(t, r)
	require.Equal(t, "existing", out["outcome"])
	require.Equal(t, "mut-fresh", out["mutationId"])
	require.Equal(t, "mut-fresh:run-2", out["run"])
	require.Equal(t, map[string]any{"planned": 3.0, "created": 0.0, "patched": 0.0, "existing": 3.0, "unchanged": 3.0, "unproven": 0.0}, out["secrets"],
		"what run 1 created is proven keyledger's on run 2")
	require.Zero(t, suite.APIRequests(t, r)["PATCH secrets"])
	require.Zero(t, suite.APIRequests(t, r)["POST secrets"], "no password travels")
	for _, n := range names {
		require.Equal(t, before[n].ResourceVersion, e.GetSecret(n).ResourceVersion, "%s not written by run 2", n)
	}

	// Run 3: what run 1 created is still proven keyledger's (its nonce is a
	// create some run of the plan journaled): no run's journal or outcome
	// calls any of it a look-alike.
	r = e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, r.Stderr)
	out = suite.Outcome(t, r)
	require.Equal(t, "existing", out["outcome"])
	require.Equal(t, "mut-fresh:run-3", out["run"])
	require.EqualValues(t, 0, out["secrets"].(map[string]any)["unproven"])
	require.Equal(t, map[string]any{names[0]: "proven", names[1]: "proven", names[2]: "proven"}, out["authorship"])
	require.NotContains(t, r.Stdout, "lookAlike")
	for n := 1; n <= 3; n++ {
		mutation := fmt.Sprintf("mut-fresh:run-%d", n)
		_, records := e.JournalOf(mutation)
		if n > 1 {
			reads := suite.RecordsOf(records, store.RecordObservation, "read-secrets")
			require.Len(t, reads, 1, "%s: every Secret read and found complete, in one record", mutation)
			for _, name := range names {
				entry := workflowtest.Fields(reads[0].Detail)["complete"].(map[string]any)[name].(map[string]any)
				require.Equal(t, "proven", entry["authorship"], "%s %s", mutation, name)
				require.Equal(t, "mut-fresh:run-1", entry["by"], "%s %s: the run whose create it carries", mutation, name)
				require.Nil(t, entry["lookAlike"])
			}
		}
		require.NotContains(t, e.JournalText(mutation), `"lookAlike":true`, mutation)
	}

	// Forced second run (a new mutation of the same plan): a GET per
	// Secret, no POST, no write, every value unchanged.
	plan2 := suite.CredentialPlan(e.NS, "mut-fresh-2", secrets)
	r = e.Keyledger([]string{"run", e.WriteCommand("plan2.json", plan2)}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out = suite.Outcome(t, r)
	require.Equal(t, "existing", out["outcome"])
	require.Equal(t, map[string]any{"planned": 3.0, "created": 0.0, "patched": 0.0, "existing": 3.0, "unchanged": 3.0, "unproven": 3.0}, out["secrets"],
		"another plan's creates prove nothing for this one")
	reqs := suite.APIRequests(t, r)
	require.Zero(t, reqs["POST secrets"])
	require.Equal(t, 3, reqs["GET secrets"])
	require.Zero(t, reqs["PATCH secrets"])
	for _, n := range names {
		after := e.GetSecret(n)
		require.Equal(t, before[n].ResourceVersion, after.ResourceVersion, "%s not written", n)
		require.Equal(t, before[n].Data, after.Data)
		require.Equal(t, "mut-fresh:run-1", after.Annotations["keyledger.dev/created-by-mutation"], "the creator stays named")
	}
	_, records = e.JournalOf("mut-fresh-2:run-1")
	require.Empty(t, suite.RecordsOf(records, store.RecordAuthorityCall, "create-secret"), "nothing POSTed")
	reads := suite.RecordsOf(records, store.RecordObservation, "read-secrets")
	require.Len(t, reads, 1)
	for _, name := range names {
		entry := workflowtest.Fields(reads[0].Detail)["complete"].(map[string]any)[name].(map[string]any)
		require.Equal(t, "unproven", entry["authorship"], "no run of this plan created it")
		require.Equal(t, true, entry["lookAlike"], "it carries keyledger's annotations, proven for no run of this plan")
	}
	suite.RequireNoValues(t, r.Stdout+r.Stderr+e.JournalText("mut-fresh-2:run-1"), values)
}

func TestIntegrationCredentialsPartialSecret(t *testing.T) {
	t.Parallel()
	e := setup(t)
	canary := []byte("CANARY-existing-password-0123456789")
	existing := e.CreateSecret(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-orders-cache-app", Labels: map[string]string{"team": "orders"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": canary, "other": []byte("kept")},
	})
	secret := suite.StandardSecret(existing.Name)
	secret.Keys = append(secret.Keys, suite.Generated("admin-password", 24, "alphanumeric"))
	plan := suite.CredentialPlan(e.NS, "mut-partial", []suite.PlanSecret{secret})
	r := e.Keyledger([]string{"run", e.WriteCommand("plan.json", plan)}, e.AsCredentialRunner(plan))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "completed", suite.Outcome(t, r)["outcome"])

	after := e.GetSecret(existing.Name)
	require.Equal(t, canary, after.Data["password"], "an existing value is byte-identical")
	require.Equal(t, []byte("kept"), after.Data["other"])
	require.Equal(t, "app", string(after.Data["username"]))
	suite.RequireAlphabet(t, after.Data["admin-password"], 24, suite.AlphanumericChars)
	require.Equal(t, map[string]string{"team": "orders", "app.kubernetes.io/part-of": "shop"}, after.Labels)
	require.NotContains(t, after.Annotations, "keyledger.dev/created-by-mutation", "a kept Secret is not claimed")
	require.Equal(t, existing.UID, after.UID)
	require.Equal(t, 1, e.SecretWrites(existing.Name, existing.ResourceVersion, after.ResourceVersion), "one patch")

	_, records := e.JournalOf("mut-partial:run-1")
	patches := suite.RecordsOf(records, store.RecordAuthorityCall, "patch-secret")
	require.Len(t, patches, 1)
	require.Equal(t, existing.ResourceVersion, patches[0].ResourceVersion, "the patch's precondition is the version read")
	require.Equal(t, []any{"username", "admin-password"}, workflowtest.Fields(patches[0].Detail)["addKeys"])
	require.Equal(t, []any{"app.kubernetes.io/part-of"}, workflowtest.Fields(patches[0].Detail)["addLabels"])
	values := append(e.SecretValues(existing.Name), canary)
	suite.RequireNoValues(t, r.Stdout+r.Stderr+e.JournalText("mut-partial:run-1"), values)
}

// Crashed after every transition, then rerun: each Secret is written once.
func TestIntegrationCredentialsCrashAtEveryTransition(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name    string
		crashes []string
		kept    bool // the first Secret exists beforehand (create answers 409, then a patch)
	}{
		{"after-prepare", []string{"after-prepare"}, false},
		{"after-call", []string{"after-call"}, false},
		{"after-send", []string{"after-send"}, false},
		{"after-answer", []string{"after-answer"}, false},
		{"kept-after-second-call", []string{"after-call#2"}, true}, // the creates go out as one batch; the patch is the second call
		{"after-complete", []string{"after-complete"}, false},
		{"after-send-then-resolve", []string{"after-send", "after-resolve"}, false},
		{"kept-after-patch-answer", []string{"after-answer"}, true}, // the Secret found in place is patched first, never POSTed
		{"kept-after-patch-send", []string{"after-send#2"}, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := fmt.Sprintf("crash-%d-a", i), fmt.Sprintf("crash-%d-b", i)
			canary := []byte(fmt.Sprintf("CANARY-kept-value-%d-abcdefgh", i))
			from := e.SecretsRV()
			if tc.kept {
				e.CreateSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: a}, Data: map[string][]byte{"password": canary}})
			}
			mutation := "mut-crash-" + tc.name
			plan := suite.CredentialPlan(e.NS, mutation, []suite.PlanSecret{suite.StandardSecret(a), suite.StandardSecret(b)})
			path := e.WriteCommand(mutation+".json", plan)
			as := e.AsCredentialRunner(plan)
			for _, fp := range tc.crashes {
				r := e.Keyledger([]string{"run", path}, as, suite.WithFailpoint(fp))
				require.Equal(t, 137, r.Code, "must die at %s: %s %s", fp, r.Stdout, r.Stderr)
			}
			r := e.Keyledger([]string{"run", path}, as)
			require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
			for _, n := range []string{a, b} {
				s := e.GetSecret(n)
				require.Equal(t, 1+boolInt(tc.kept && n == a), e.SecretWrites(n, from, s.ResourceVersion), "%s: values written once", n)
				require.Len(t, s.Data["password"], map[bool]int{true: len(canary), false: 32}[tc.kept && n == a])
				require.Equal(t, "app", string(s.Data["username"]))
			}
			if tc.kept {
				require.Equal(t, canary, e.GetSecret(a).Data["password"])
			}
			// The next sync is a new run: it finds everything in place.
			r2 := e.Keyledger([]string{"run", path}, as)
			require.Equal(t, 0, r2.Code, "%s %s", r2.Stdout, r2.Stderr)
			require.Equal(t, "existing", suite.Outcome(t, r2)["outcome"])
			// Created exactly once each, from the API server's watch history
			// (a kept Secret was created by the test, before the runs).
			creates := e.SecretCreates(from)
			require.Equal(t, 1, creates[a], "%s created once", a)
			require.Equal(t, 1, creates[b], "%s created once", b)
			op, records := e.JournalOf(mutation + ":run-1")
			require.Equal(t, store.StateCompleted, op.State)
			require.Equal(t, 1, suite.Count(records, store.RecordCompletion))
			suite.RequireNoValues(t, r.Stdout+r.Stderr+e.JournalText(mutation+":run-1"), e.SecretValues(a, b))
		})
	}
}

// Crashed in the middle of a batch of creates sent in chunks (the engine
// journals and sends a batch of more than 8 calls in chunks: 8, then the
// 12 others here): right after the second chunk's records were committed,
// before it was sent, the first chunk's POSTs in flight. The rerun settles
// every journaled call (the nonce decides: ours, or absent and created
// again): each Secret is created once.
func TestIntegrationCredentialsCrashMidPipeline(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const n = 20
	from := e.SecretsRV()
	var secrets []suite.PlanSecret
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("chunked-%02d", i))
		secrets = append(secrets, suite.StandardSecret(names[i]))
	}
	plan := suite.CredentialPlan(e.NS, "mut-chunked", secrets)
	path := e.WriteCommand("chunked.json", plan)
	as := e.AsCredentialRunner(plan)
	r := e.Keyledger([]string{"run", path}, as, suite.WithFailpoint("after-chunk"))
	require.Equal(t, 137, r.Code, "must die at after-chunk: %s %s", r.Stdout, r.Stderr)
	op, records := e.JournalOf("mut-chunked:run-1")
	require.Equal(t, store.StateCalling, op.State)
	require.Len(t, suite.RecordsOf(records, store.RecordAuthorityCall, "create-secret"), n, "both chunks journaled")
	r = e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, "completed", suite.Outcome(t, r)["outcome"])
	creates := e.SecretCreates(from)
	for _, name := range names {
		s := e.GetSecret(name)
		require.Equal(t, 1, creates[name], "%s created once", name)
		require.Equal(t, 1, e.SecretWrites(name, from, s.ResourceVersion), "%s: values written once", name)
		require.Len(t, s.Data["password"], 32)
	}
	_, records = e.JournalOf("mut-chunked:run-1")
	for _, res := range suite.RecordsOf(records, store.RecordResolution, "create-secret") {
		require.Contains(t, []store.Reason{"created-by-this-mutation", "absent"}, res.Reason, res.Target)
	}
	suite.RequireNoValues(t, r.Stdout+r.Stderr+e.JournalText("mut-chunked:run-1"), e.SecretValues(names...))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A create whose answer is lost: the re-read finds this mutation's
// annotation (ours); a reset before sending: absent, created again once.
func TestIntegrationCredentialsLostResponse(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		fault      string
		resolution string
		calls      int
	}{
		{"drop-response:POST:/secrets#1", "created-by-this-mutation", 1},
		{"reset:POST:/secrets#1", "absent", 2},
	}
	for i, tc := range cases {
		name := fmt.Sprintf("lost-%d", i)
		mutation := fmt.Sprintf("mut-lost-%d", i)
		from := e.SecretsRV()
		plan := suite.CredentialPlan(e.NS, mutation, []suite.PlanSecret{suite.StandardSecret(name)})
		r := e.Keyledger([]string{"run", e.WriteCommand(mutation+".json", plan)}, e.AsCredentialRunner(plan),
			suite.WithEnv("KEYLEDGER_FAULT="+tc.fault))
		require.Equal(t, 0, r.Code, "%s: %s %s", tc.fault, r.Stdout, r.Stderr)
		s := e.GetSecret(name)
		require.Equal(t, 1, e.SecretWrites(name, from, s.ResourceVersion), "%s: one write", tc.fault)
		require.Equal(t, mutation+":run-1", s.Annotations["keyledger.dev/created-by-mutation"])
		_, records := e.JournalOf(mutation + ":run-1")
		require.Len(t, suite.RecordsOf(records, store.RecordAuthorityCall, "create-secret"), tc.calls, tc.fault)
		res := suite.RecordsOf(records, store.RecordResolution, "create-secret")
		require.Len(t, res, 1, tc.fault)
		require.Equal(t, store.Reason(tc.resolution), res[0].Reason, tc.fault)
		require.False(t, strings.Contains(r.Stdout+r.Stderr, string(s.Data["password"])))
	}
}
