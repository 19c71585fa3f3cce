package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	pre := e.createSecret(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			credentials.AnnotationCreatedBy: "mut-lookalike:run-1", credentials.AnnotationNonce: "0123456789abcdef0123456789abcdef"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": known},
	})
	plan := credentialPlan(e.ns, "mut-lookalike", []planSecret{standardSecret(name)})
	r := e.keyledger([]string{"run", e.writeCommand("plan.json", plan)}, e.asCredentialRunner(plan),
		withEnv("KEYLEDGER_FAULT=drop-response:POST:/secrets#1"))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := outcome(t, r)
	require.Equal(t, map[string]any{"planned": 1.0, "created": 0.0, "patched": 1.0, "existing": 1.0, "unchanged": 0.0, "unproven": 1.0}, out["secrets"],
		"never reported as created")
	after := e.getSecret(name)
	require.Equal(t, pre.UID, after.UID)
	require.Equal(t, known, after.Data["password"], "its password is kept, never taken for a generated one")
	require.Equal(t, "app", string(after.Data["username"]), "only the missing key is added")

	_, records := e.journalOf("mut-lookalike:run-1")
	require.Equal(t, true, readOf(t, records, name)["lookAlike"])
	patches := recordsOf(records, store.RecordAuthorityCall, "patch-secret")
	require.Len(t, patches, 1)
	require.Equal(t, []any{"username"}, workflowtest.Fields(patches[0].Detail)["addKeys"])
	requireNoValues(t, r.Stdout+r.Stderr+e.journalText("mut-lookalike:run-1"), [][]byte{known})
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
		return generated(fmt.Sprintf("%02d-%s", k, strings.Repeat("k", 60)), 16, "hex")
	}
	var secrets []planSecret
	total := 0
	for i := range credentials.MaxSecrets {
		s := planSecret{name: fmt.Sprintf("largest-%02d-%s", i, strings.Repeat("n", 30))}
		n := (credentials.MaxKeys - 4*credentials.MaxKeysPerSecret) / (credentials.MaxSecrets - 4)
		if i < 4 {
			n = credentials.MaxKeysPerSecret
			s.labels = map[string]string{}
			for l := range credentials.MaxLabelsPerSecret {
				s.labels[fmt.Sprintf("example.com/l%02d-%s", l, strings.Repeat("x", 20))] = "v"
			}
		} else if i-4 < (credentials.MaxKeys-4*credentials.MaxKeysPerSecret)%(credentials.MaxSecrets-4) {
			n++
		}
		for k := range n {
			s.keys = append(s.keys, key(k))
		}
		total += n
		secrets = append(secrets, s)
	}
	require.Equal(t, credentials.MaxKeys, total)
	plan := credentialPlan(e.ns, "mut-largest", secrets)
	path := e.writeCommand("plan.json", plan)
	as := e.asCredentialRunner(plan)
	r := e.keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "completed", outcome(t, r)["outcome"])
	first := map[string]string{}
	for _, s := range secrets {
		got := e.getSecret(s.name)
		require.Len(t, got.Data, len(s.keys))
		first[s.name] = got.ResourceVersion
	}
	r = e.keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "existing", outcome(t, r)["outcome"], "the second run converges: nothing to write")
	for _, s := range secrets {
		require.Equal(t, first[s.name], e.getSecret(s.name).ResourceVersion)
	}
	require.Len(t, e.runsOf("mut-largest"), 2)

	// One key more.
	last := len(secrets) - 1
	secrets[last].keys = append(append([]map[string]any{}, secrets[last].keys...), key(99))
	over := credentialPlan(e.ns, "mut-largest-over", secrets)
	r = e.keyledger([]string{"run", e.writeCommand("over.json", over)}, as)
	require.Equal(t, 64, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stdout+r.Stderr, fmt.Sprintf("%d keys", credentials.MaxKeys), "the message names the limit")
	require.Empty(t, e.runsOf("mut-largest-over"), "nothing journaled")
}
