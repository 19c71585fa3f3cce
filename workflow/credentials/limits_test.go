package credentials

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// journalDetailLimit is the journal's limit on one record's detail
// (migrations: octet_length(detail::text) <= 16384).
const journalDetailLimit = 16384

// The largest Secret a plan may name (MaxKeysPerSecret keys and
// MaxLabelsPerSecret labels, every name as long as Kubernetes allows)
// produces records that fit the journal: the create call, the read of the
// existing Secret, the verdict that keeps it, the patch call and its
// resolution, each with what the engine adds to an answer.
func TestLimitsFitTheJournal(t *testing.T) {
	t.Parallel()
	var plan Secret
	plan.Name = strings.Repeat("s", 253)
	plan.Labels = map[string]string{}
	for i := range MaxKeysPerSecret {
		plan.Keys = append(plan.Keys, Key{Name: fmt.Sprintf("%03d", i) + strings.Repeat("k", 250), Generate: &Generate{Length: MaxLength, Alphabet: AlphabetAlphanumeric}})
	}
	for i := range MaxLabelsPerSecret {
		plan.Labels[fmt.Sprintf("%03d", i)+strings.Repeat("p", 250)+"/"+strings.Repeat("n", 63)] = strings.Repeat("v", 63)
	}
	// An adopted, present Secret lacking every key and label.
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: plan.Name, UID: "u", ResourceVersion: "1",
		Labels:      map[string]string{LabelArgoInstance: "x"},
		Annotations: map[string]string{AnnotationArgoTracking: "x"}}}
	for i := range 100 {
		s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{APIVersion: "external-secrets.io/v1", Kind: kindExternalSecret,
			Name: strings.Repeat("o", 250) + fmt.Sprint(i)})
	}
	c := diff(s, plan, true)
	require.Len(t, c.AddKeys, MaxKeysPerSecret)
	engine := map[string]any{"code": 422} // what the engine adds to an answer
	fits := func(what string, typed any) {
		d := workflowtest.Fields(store.DetailOf(typed))
		t.Helper()
		out := map[string]any{}
		for k, v := range d {
			out[k] = v
		}
		for k, v := range engine {
			out[k] = v
		}
		b, err := json.Marshal(out)
		require.NoError(t, err)
		t.Logf("%s: %d bytes", what, len(b))
		require.LessOrEqual(t, len(b), journalDetailLimit, "%s record detail", what)
	}
	fits("create call", map[string]any{"keys": plannedKeys(plan)})
	fits("patch call", c.detail())
	obs := observation(s, c, nil)
	fits("read-secret observation", obs.Detail)
	fits("kept-existing verdict", keptDetail(s, c))
}

// One key more than the limits is refused with exit 64, naming the limit.
func TestLimitsRefused(t *testing.T) {
	t.Parallel()
	keys := func(n int) string {
		var ks []string
		for i := range n {
			ks = append(ks, fmt.Sprintf(`{"name":"k%d","value":"v"}`, i))
		}
		return strings.Join(ks, ",")
	}
	secret := func(name string, n int) string { return `{"name":"` + name + `","keys":[` + keys(n) + `]}` }
	spec := func(secrets ...string) string {
		return `{"owner":"o","namespace":"ns","secrets":[` + strings.Join(secrets, ",") + `]}`
	}
	_, err := decode(t, planJSON(spec(secret("a", MaxKeysPerSecret))))
	require.NoError(t, err)
	_, err = decode(t, planJSON(spec(secret("a", MaxKeysPerSecret+1))))
	require.ErrorContains(t, err, fmt.Sprintf("at most %d keys per Secret", MaxKeysPerSecret))
	require.ErrorContains(t, err, "spec.secrets[0].keys")

	var full []string
	for i := range MaxKeys / MaxKeysPerSecret {
		full = append(full, secret(fmt.Sprintf("s%d", i), MaxKeysPerSecret))
	}
	_, err = decode(t, planJSON(spec(full...)))
	require.NoError(t, err, "MaxKeys keys in all is valid")
	_, err = decode(t, planJSON(spec(append(full, secret("one-more", 1))...)))
	var invalid *command.InvalidError
	require.ErrorAs(t, err, &invalid)
	require.ErrorContains(t, err, fmt.Sprintf("more than %d keys in all", MaxKeys))

	labels := map[string]string{}
	for i := range MaxLabelsPerSecret + 1 {
		labels[fmt.Sprintf("l%d", i)] = "v"
	}
	lb, _ := json.Marshal(labels)
	_, err = decode(t, planJSON(spec(`{"name":"a","labels":`+string(lb)+`,"keys":[`+keys(1)+`]}`)))
	require.ErrorContains(t, err, fmt.Sprintf("at most %d labels per Secret", MaxLabelsPerSecret))
}

// A plan's mutationId leaves room for the run suffix and never names a run.
func TestMutationIDLeavesRoomForRuns(t *testing.T) {
	t.Parallel()
	withID := func(id string) string {
		return `{"apiVersion":"keyledger.dev/v1","kind":"CredentialPlan","metadata":{"requestId":"r-1","mutationId":"` + id + `"},"spec":` + validSpec + `}`
	}
	_, err := decode(t, withID(strings.Repeat("m", MaxMutationID)))
	require.NoError(t, err)
	require.LessOrEqual(t, len(store.RunID(strings.Repeat("m", MaxMutationID), 9999999999)), command.MaxIdentifier)
	_, err = decode(t, withID(strings.Repeat("m", MaxMutationID+1)))
	require.ErrorContains(t, err, "metadata.mutationId")
	_, err = decode(t, withID("m1:run-3"))
	require.ErrorContains(t, err, "names a run of another plan")
}

// After a lost answer, a Secret is the create call's only with the nonce
// whose digest the call journaled, the planned type and exactly the
// planned keys; the created-by annotation proves nothing.
func TestCreatedByNeedsTheNonce(t *testing.T) {
	t.Parallel()
	plan := Secret{Name: "a", Keys: []Key{{Name: "password", Generate: &Generate{Length: 16, Alphabet: AlphabetHex}}, {Name: "user", Value: new(string)}}}
	nonce, err := newNonce(rand.Reader)
	require.NoError(t, err)
	s, err := newSecret(rand.Reader, "ns", "m1:run-1", nonce, plan)
	require.NoError(t, err)
	digest := nonceDigest(nonce)
	ours := func(s *corev1.Secret, digests ...string) bool {
		_, ok := createdBy(s, plan, digests...)
		return ok
	}
	require.True(t, ours(s, digest))

	other, err := newNonce(rand.Reader)
	require.NoError(t, err)
	require.NotEqual(t, nonce, other)
	require.False(t, ours(s, nonceDigest(other)), "another call's nonce")
	require.False(t, ours(s, ""), "a call without a nonce digest")
	require.False(t, ours(s), "no call at all")
	got, ok := createdBy(s, plan, nonceDigest(other), digest)
	require.True(t, ok, "an earlier attempt's nonce of the same operation")
	require.Equal(t, digest, got, "the matching attempt is named")

	lookAlike := s.DeepCopy()
	lookAlike.Annotations[AnnotationNonce] = "forged"
	require.False(t, ours(lookAlike, digest), "same annotations, not the nonce")
	extra := s.DeepCopy()
	extra.Data["more"] = []byte("x")
	require.False(t, ours(extra, digest), "not exactly the planned keys")
	missing := s.DeepCopy()
	delete(missing.Data, "user")
	require.False(t, ours(missing, digest))
	typed := s.DeepCopy()
	typed.Type = corev1.SecretTypeBasicAuth
	require.False(t, ours(typed, digest), "not the planned type")
	require.NotContains(t, digest, nonce, "the journal holds a digest of the nonce, not the nonce")
}

// Every create attempt of the operation for one Secret proves ownership
// (each nonce digest was journaled before its send); attempts for other
// Secrets and other records do not count.
func TestCreateDigestsAreEveryAttemptForTheTarget(t *testing.T) {
	t.Parallel()
	records := []store.Record{
		{Kind: store.RecordAuthorityCall, Step: stepCreateSecret, Target: store.SecretTarget(nsShop, "a"), Digest: "sha256:first"},
		{Kind: store.RecordResolution, Step: stepCreateSecret, Target: store.SecretTarget(nsShop, "a"), Digest: "sha256:resolution"},
		{Kind: store.RecordAuthorityCall, Step: stepCreateSecret, Target: store.SecretTarget(nsShop, "b"), Digest: "sha256:other-secret"},
		{Kind: store.RecordAuthorityCall, Step: stepCreateSecret, Target: store.SecretTarget(nsShop, "a"), Digest: "sha256:second"},
	}
	require.Equal(t, []string{"sha256:first", "sha256:second"}, createDigests(records, store.SecretTarget(nsShop, "a")))
	require.Empty(t, createDigests(records, store.SecretTarget(nsShop, "c")))
}
