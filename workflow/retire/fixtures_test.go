package retire

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/kubetest"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/retire/keyring/keyringtest"
)

// The fixtures' names: the keyring Secret and the retirement of k-2026-07
// by mutation mut-7.
const (
	fxNamespace  = "shop"
	fxSecret     = "orders-keyring"
	fxDataKey    = "keyring.json"
	fxKey        = "k-2026-07"
	fxMutation   = "mut-7"
	fxRequest    = "req-7"
	fxRetirement = "ret-7"
)

// standardKeyring has three keys: two retirable, k-2026-08 active.
func standardKeyring() *keyring.Manifest {
	return keyringtest.New(
		keyringtest.WithKey("k-2026-06", "2026-06-01T00:00:00Z", keyringtest.Material("k-2026-06")),
		keyringtest.WithKey("k-2026-07", "2026-07-01T00:00:00Z", keyringtest.Material("k-2026-07")),
		keyringtest.WithKey("k-2026-08", "2026-08-01T00:00:00Z", keyringtest.Material("k-2026-08")),
		keyringtest.WithActive("k-2026-08"),
		keyringtest.WithGeneration(4),
	)
}

// secretOption changes a keyring Secret before the double holds it.
type secretOption func(*corev1.Secret)

// keyringSecret is a valid keyring Secret holding m.
func keyringSecret(m *keyring.Manifest, opts ...secretOption) *corev1.Secret {
	s := kubetest.NewSecret(fxSecret, kubetest.WithLabels(LabelKeyring, LabelKeyringManaged))
	s.Namespace = fxNamespace
	holding(m)(s)
	for _, o := range opts {
		o(s)
	}
	return s
}

// holding puts m in the Secret with its annotations in step.
func holding(m *keyring.Manifest) secretOption {
	return func(s *corev1.Secret) {
		s.Data = map[string][]byte{fxDataKey: m.Encode()}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[AnnotationGeneration] = strconv.FormatInt(m.Generation, 10)
		s.Annotations[AnnotationCatalogDigest] = m.CatalogDigest()
	}
}

// retirement is the command retiring fxKey from the Secret whose UID is
// uid; opts change its spec.
func retirement(uid string, opts ...func(*Spec)) *Command {
	spec := Spec{
		Namespace: fxNamespace, SecretName: fxSecret, ExpectedUID: uid, DataKey: fxDataKey, KeyID: fxKey,
		RetirementID: fxRetirement, ExpectedMaterialDigest: keyring.MaterialDigest(keyringtest.Material(fxKey)),
	}
	for _, o := range opts {
		o(&spec)
	}
	md := command.Metadata{RequestID: fxRequest, MutationID: fxMutation}
	doc, err := json.Marshal(map[string]any{"metadata": md, "spec": spec})
	if err != nil {
		panic(err)
	}
	return &Command{Metadata: md, Spec: spec, Digest: fmt.Sprintf("sha256:%x", sha256.Sum256(doc))}
}

// receiptBy is a receipt for keyID by another mutation than fxMutation.
func receiptBy(mutation, keyID string, generation int64) keyring.Retirement {
	return keyring.Retirement{
		KeyID: keyID, RetirementID: "ret-" + mutation, RequestID: "req-" + mutation, MutationID: mutation,
		MaterialDigest: keyring.MaterialDigest(keyringtest.Material(keyID)), Generation: generation,
		RetiredAt: "2026-11-30T16:00:00Z",
	}
}

// retiredBy returns m with keyID retired by mutation (someone else's, or
// this operation's own receipt when mutation is fxMutation).
func retiredBy(t testing.TB, m *keyring.Manifest, mutation, keyID string) *keyring.Manifest {
	t.Helper()
	p := keyring.RetireParams{
		KeyID: keyID, ExpectedMaterialDigest: keyring.MaterialDigest(keyringtest.Material(keyID)),
		RetirementID: "ret-" + mutation, RequestID: "req-" + mutation, MutationID: mutation,
		RetiredAt: time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC),
	}
	if mutation == fxMutation {
		p.RetirementID, p.RequestID = fxRetirement, fxRequest
	}
	next, err := m.Retire(p)
	require.NoError(t, err)
	return next
}

// requireRetired checks that s holds before minus fxKey with this
// operation's receipt, one generation up, its annotations in step and every
// other key's material untouched.
// retiredAt is the operation's preparation time.
func requireRetired(t testing.TB, s *corev1.Secret, before *keyring.Manifest, retiredAt time.Time) {
	t.Helper()
	require.NotNil(t, s, "the Secret exists")
	m, err := keyring.Parse(s.Data[fxDataKey])
	require.NoError(t, err)
	_, present := m.Key(fxKey)
	require.False(t, present, "the retired key's material is gone")
	r, ok := m.Receipt(fxKey)
	require.True(t, ok, "a receipt is left")
	require.Equal(t, keyring.Retirement{
		KeyID: fxKey, RetirementID: fxRetirement, RequestID: fxRequest, MutationID: fxMutation,
		MaterialDigest: keyring.MaterialDigest(keyringtest.Material(fxKey)), Generation: before.Generation + 1,
		RetiredAt: retiredAt.UTC().Truncate(time.Second).Format(keyring.TimeLayout),
	}, r)
	require.Equal(t, before.Generation+1, m.Generation)
	require.Equal(t, strconv.FormatInt(m.Generation, 10), s.Annotations[AnnotationGeneration])
	require.Equal(t, m.CatalogDigest(), s.Annotations[AnnotationCatalogDigest])
	require.Len(t, m.Keys, len(before.Keys)-1)
	for _, k := range before.Keys {
		if k.ID == fxKey {
			continue
		}
		kept, ok := m.Key(k.ID)
		require.True(t, ok, "key %s kept", k.ID)
		require.Equal(t, []byte(k.Material), []byte(kept.Material), "key %s material untouched", k.ID)
	}
}

// trail is the journal's records in short words: the kind, then the
// attempt of a call, the status and reason of a result or resolution, the
// outcome of a completion, the reason of a refusal.
func trail(records []store.Record) []string {
	var out []string
	for _, r := range records {
		var w string
		switch r.Kind {
		case store.RecordAuthorityCall:
			w = fmt.Sprintf("call %d", r.Attempt)
		case store.RecordAuthorityResult:
			w = strings.TrimSpace("result " + string(r.Status) + " " + string(r.Reason))
		case store.RecordResolution:
			w = strings.TrimSpace("resolution " + string(r.Status) + " " + string(r.Reason))
		case store.RecordCompletion:
			w = "completion " + string(r.Status)
		case store.RecordRefusal:
			w = "refusal " + string(r.Reason)
		default:
			w = string(r.Kind)
		}
		out = append(out, w)
	}
	return out
}
