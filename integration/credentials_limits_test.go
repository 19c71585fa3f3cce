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
	"github.com/keyledger/keyledger/workflow/credentials"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// A Secret pre-created with keyledger's annotations (the created-by
// annotation naming this very run, a nonce) and a password someone knows is
// not ours: after the create's answer is lost, the re-read does not find
// this call's nonce, so the Secret is kept as existing, only what it lacks
// is added, and the run never reports it as created.
func TestIntegrationCredentialsLookAlikeSecret(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const name = "shop-lookalike-app"
	known := []byte("CANARY-a-password-someone-knows")
	pre := e.CreateSecret(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			credentials.AnnotationCreatedBy: "mut-lookalike:run-1", credentials.AnnotationNonce: "0123456789abcdef0123456789abcdef"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": known},
	})
	plan := suite.CredentialPlan(e.NS, "mut-lookalike", []suite.PlanSecret{suite.StandardSecret(name)})
	r := e.Keyledger([]string{"run", e.WriteCommand("plan.json", plan)}, e.AsCredentialRunner(plan),
		suite.WithEnv("KEYLEDGER_FAULT=drop-response:POST:/secrets#1"))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := suite.Outcome(t, r)
	require.Equal(t, map[string]any{"planned": 1.0, "created": 0.0, "patched": 1.0, "existing": 1.0, "unchanged": 0.0, "unproven": 1.0}, out["secrets"],
		"never reported as created")
	after := e.GetSecret(name)
	require.Equal(t, pre.UID, after.UID)
	require.Equal(t, known, after.Data["password"], "its password is kept, never taken for a generated one")
	require.Equal(t, "app", string(after.Data["username"]), "only the missing key is added")

	_, records := e.JournalOf("mut-lookalike:run-1")
	require.Equal(t, true, readOf(t, records, name)["lookAlike"])
	patches := suite.RecordsOf(records, store.RecordAuthorityCall, "patch-secret")
	require.Len(t, patches, 1)
	require.Equal(t, []any{"username"}, workflowtest.Fields(patches[0].Detail)["addKeys"])
	suite.RequireNoValues(t, r.Stdout+r.Stderr+e.JournalText("mut-lookalike:run-1"), [][]byte{known})
}

// The largest valid plan (MaxSecrets Secrets, MaxKeys keys in all, Secrets
// with MaxKeysPerSecret keys and MaxLabelsPerSecret labels, long names) runs
// twice and converges: every record fits the journal. One key more is
// refused with exit 64 naming the limit, before anything is journaled.
func TestIntegrationCredentialsLargestPlan(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// 4 Secrets at MaxKeysPerSecret keys with MaxLabelsPerSecret labels,
	// the other 60 sharing the rest of MaxKeys (the 64 KiB command file is
	// the other bound: not every Secret can be at every limit).
	key := func(k int) map[string]any {
		return suite.Generated(fmt.Sprintf("%02d-%s", k, strings.Repeat("k", 60)), 16, "hex")
	}
	var secrets []suite.PlanSecret
	total := 0
	for i := range credentials.MaxSecrets {
		s := suite.PlanSecret{Name: fmt.Sprintf("largest-%02d-%s", i, strings.Repeat("n", 30))}
		n := (credentials.MaxKeys - 4*credentials.MaxKeysPerSecret) / (credentials.MaxSecrets - 4)
		if i < 4 {
			n = credentials.MaxKeysPerSecret
			s.Labels = map[string]string{}
			for l := range credentials.MaxLabelsPerSecret {
				s.Labels[fmt.Sprintf("example.com/l%02d-%s", l, strings.Repeat("x", 20))] = "v"
			}
		} else if i-4 < (credentials.MaxKeys-4*credentials.MaxKeysPerSecret)%(credentials.MaxSecrets-4) {
			n++
		}
		for k := range n {
			s.Keys = append(s.Keys, key(k))
		}
		total += n
		secrets = append(secrets, s)
	}
	require.Equal(t, credentials.MaxKeys, total)
	plan := suite.CredentialPlan(e.NS, "mut-largest", secrets)
	path := e.WriteCommand("plan.json", plan)
	as := e.AsCredentialRunner(plan)
	r := e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "completed", suite.Outcome(t, r)["outcome"])
	first := map[string]string{}
	for _, s := range secrets {
		got := e.GetSecret(s.Name)
		require.Len(t, got.Data, len(s.Keys))
		first[s.Name] = got.ResourceVersion
	}
	r = e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "existing", suite.Outcome(t, r)["outcome"], "the second run converges: nothing to write")
	for _, s := range secrets {
		require.Equal(t, first[s.Name], e.GetSecret(s.Name).ResourceVersion)
	}
	require.Len(t, e.RunsOf("mut-largest"), 2)

	// One key more.
	last := len(secrets) - 1
	secrets[last].Keys = append(append([]map[string]any{}, secrets[last].Keys...), key(99))
	over := suite.CredentialPlan(e.NS, "mut-largest-over", secrets)
	r = e.Keyledger([]string{"run", e.WriteCommand("over.json", over)}, as)
	require.Equal(t, 64, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stdout+r.Stderr, fmt.Sprintf("%d keys", credentials.MaxKeys), "the message names the limit")
	require.Empty(t, e.RunsOf("mut-largest-over"), "nothing journaled")
}
