package retire

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/retire/keyring/keyringtest"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// An error that is neither a refusal of the Secret nor a keyring refusal is
// refused with one fixed word: its text never becomes a reason.
func TestReasonOfUnknownError(t *testing.T) {
	t.Parallel()
	require.Equal(t, "invalid-keyring", reasonOf(errors.New("secret text")))
	require.Equal(t, ReasonImmutable, reasonOf(fmt.Errorf("reading: %w", &refusal{ReasonImmutable})))
	require.EqualError(t, &refusal{ReasonImmutable}, ReasonImmutable)
	require.Equal(t, keyring.ReasonKeyActive, reasonOf(fmt.Errorf("retiring: %w", &keyring.Error{Reason: keyring.ReasonKeyActive})))
}

// withManifest returns a copy carrying the manifest and its annotations,
// with the read resourceVersion as precondition, and never changes the
// Secret it was given (the read object is what summaries describe).
func TestWithManifestCopies(t *testing.T) {
	t.Parallel()
	m := standardKeyring()
	s := keyringSecret(m)
	s.Annotations, s.ResourceVersion = nil, "41"
	read := s.DeepCopy()
	next := retiredBy(t, m, fxMutation, fxKey)
	out := withManifest(s, fxDataKey, next)
	require.Equal(t, read, s, "the read Secret is unchanged")
	require.Equal(t, "41", out.ResourceVersion)
	require.Equal(t, map[string][]byte{fxDataKey: next.Encode()}, out.Data)
	require.Equal(t, map[string]string{AnnotationGeneration: "5", AnnotationCatalogDigest: next.CatalogDigest()}, out.Annotations)
}

// Like kube.SecretReplacer, the seam refuses another Secret and a replace
// without a resourceVersion precondition before sending: neither reaches
// the API server.
func TestKeyringAPIRefusesAsTheAdapter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newAPI(keyringSecret(standardKeyring()))
	a := keyringAPI{d, fxSecret}
	read, err := a.Get(ctx)
	require.NoError(t, err)

	_, err = a.Replace(ctx, &corev1.Secret{})
	require.ErrorContains(t, err, "adapter is bound to", "another Secret is refused before sending")
	unconditional := read.DeepCopy()
	unconditional.ResourceVersion = ""
	_, err = a.Replace(ctx, unconditional)
	require.ErrorContains(t, err, "no resourceVersion precondition")
	require.Zero(t, replaces(d), "neither reached the API server")

	read.Annotations["example.com/a"] = "1"
	written, err := a.Replace(ctx, read)
	require.NoError(t, err)
	require.Equal(t, now(d), written)
	require.Equal(t, []*corev1.Secret{written}, replaced(d))
	require.Equal(t, 1, gets(d))
	require.Equal(t, 1, replaces(d))

	onReplace(d, conflict)
	_, err = a.Replace(ctx, written)
	require.ErrorIs(t, err, kube.ReasonConflict, "answers are the adapter's errors")
}

// The call is journaled before it is sent with the read's identity as its
// precondition and the intended catalog digest; its result names the
// object the API server stored.
func TestRetireCallRecord(t *testing.T) {
	t.Parallel()
	m := standardKeyring()
	sc := newScene(t, m, keyringSecret(m))
	_, err := sc.run(nil)
	require.NoError(t, err)
	op, records := sc.operation()
	want := retiredBy(t, m, fxMutation, fxKey)
	want.Retirements[len(want.Retirements)-1].RetiredAt = op.CreatedAt.UTC().Format(keyring.TimeLayout)
	stored := now(sc.api)

	require.Equal(t, []string{"preparation", "observation", "call 1", "result applied", "completion completed"}, trail(records))
	obs, call, result, done := records[1], records[2], records[3], records[4]
	require.Equal(t, store.Record{ID: obs.ID, Kind: store.RecordObservation, Step: "read-keyring", Target: store.SecretTarget(fxNamespace, fxSecret),
		UID: string(sc.start.UID), ResourceVersion: sc.start.ResourceVersion, Digest: m.CatalogDigest(),
		Detail: store.DetailOf(map[string]any{"generation": 4, "keys": 3}), CreatedAt: obs.CreatedAt}, obs,
		"what the read showed: identity, version and catalog digest, never material")
	require.Equal(t, stepReplace, call.Step)
	require.True(t, call.Final, "the one call is final")
	require.Equal(t, 1, call.Batch)
	require.Equal(t, "secret/"+fxSecret, call.Target.String())
	require.Equal(t, string(sc.start.UID), call.UID)
	require.Equal(t, sc.start.ResourceVersion, call.ResourceVersion, "the precondition is the resourceVersion read")
	require.Equal(t, want.CatalogDigest(), call.Digest, "the intended catalog digest is journaled before the call")
	require.Equal(t, float64(5), workflowtest.Fields(call.Detail)["generation"])
	require.Equal(t, stored.ResourceVersion, result.ResourceVersion)
	require.Equal(t, want.CatalogDigest(), result.Digest)
	require.Equal(t, map[string]any{
		"secret":     map[string]any{"namespace": fxNamespace, "name": fxSecret, "uid": string(sc.start.UID)},
		"generation": float64(5), "catalogDigest": want.CatalogDigest(),
	}, workflowtest.Fields(done.Detail))
}

// keyring inspect prints the catalog (digests, never material), finds the
// data key when there is one entry, and refuses as a retirement would.
func TestInspect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := standardKeyring()
	d := newAPI(keyringSecret(m))
	a := keyringAPI{d, fxSecret}

	for _, key := range []string{fxDataKey, ""} {
		catalog, err := inspect(ctx, a, key)
		require.NoError(t, err)
		require.Equal(t, m.Catalog(), catalog)
		keyringtest.AssertNoMaterial(t, string(catalog), keyringtest.Material("k-2026-06"),
			keyringtest.Material("k-2026-07"), keyringtest.Material("k-2026-08"))
	}

	_, err := inspect(ctx, a, "other.json")
	var refused *workflow.Refused
	require.ErrorAs(t, err, &refused)
	require.Equal(t, ReasonDataEntries, refused.Reason)

	onGet(d, serverError)
	_, err = inspect(ctx, a, fxDataKey)
	var unavailable *workflow.Unavailable
	require.ErrorAs(t, err, &unavailable)
	require.Equal(t, "kubernetes", unavailable.Dependency)

	theirDelete(d)
	_, err = inspect(ctx, a, fxDataKey)
	require.ErrorAs(t, err, &refused)
	require.Equal(t, ReasonSecretAbsent, refused.Reason)
	require.Empty(t, replaced(d), "inspect only reads")
}

// writtenCatalog reads the Secret a replace returned as readCatalog
// would, whatever came back: the same digest or the same refusal. When
// the Secret holds what was sent it returns the digest sent without
// decoding the manifest again.
func TestWrittenCatalogReadsAsReadCatalog(t *testing.T) {
	t.Parallel()
	m := standardKeyring()
	read := keyringSecret(m)
	spec := retirement(string(read.UID)).Spec
	next := retiredBy(t, m, fxMutation, fxKey)
	sent := withManifest(read, fxDataKey, next)
	other := retiredBy(t, m, "mut-other", fxKey)
	cases := map[string]func(*corev1.Secret){
		"as sent":                func(*corev1.Secret) {},
		"another valid manifest": holding(other),
		"another manifest, sent annotations": func(s *corev1.Secret) {
			s.Data[fxDataKey] = other.Encode()
		},
		"a generation annotation changed": func(s *corev1.Secret) { s.Annotations[AnnotationGeneration] = "6" },
		"a digest annotation changed":     func(s *corev1.Secret) { s.Annotations[AnnotationCatalogDigest] = m.CatalogDigest() },
		"not canonical":                   func(s *corev1.Secret) { s.Data[fxDataKey] = append(s.Data[fxDataKey], ' ') },
		"another UID":                     func(s *corev1.Secret) { s.UID = "other-uid" },
		"label removed":                   func(s *corev1.Secret) { delete(s.Labels, LabelKeyring) },
		"a second data entry":             func(s *corev1.Secret) { s.Data["more"] = []byte("x") },
		"the data key gone": func(s *corev1.Secret) {
			s.Data = map[string][]byte{"other.json": s.Data[fxDataKey]}
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			got := sent.DeepCopy()
			change(got)
			_, wantDigest, wantErr := readCatalog(got, spec)
			digest, err := writtenCatalog(got, sent, spec)
			require.Equal(t, wantDigest, digest)
			require.Equal(t, reasonOrEmpty(wantErr), reasonOrEmpty(err))
			if name == "as sent" {
				require.NoError(t, err)
				require.Equal(t, next.CatalogDigest(), digest)
			}
		})
	}
}

func reasonOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return reasonOf(err)
}

// A keyring Secret is bounded as a whole (keyring.MaxSecretBytes), not
// only its manifest: annotations that take it over 256 KiB refuse it
// (too-large) although its manifest is small.
func TestKeyringSecretBoundedAsAWhole(t *testing.T) {
	t.Parallel()
	spec := Spec{ExpectedUID: "uid-1", DataKey: fxDataKey}
	s := keyringSecret(standardKeyring())
	s.UID = "uid-1"
	_, err := keyringData(s, spec)
	require.NoError(t, err)
	pad := keyring.MaxSecretBytes - secretBytes(s) - len("pad")
	s.Annotations["pad"] = string(make([]byte, pad))
	require.Equal(t, keyring.MaxSecretBytes, secretBytes(s))
	_, err = keyringData(s, spec)
	require.NoError(t, err, "at the bound: accepted")
	s.Annotations["pad"] += "x"
	_, err = keyringData(s, spec)
	require.Equal(t, keyring.ReasonTooLarge, reasonOf(err), "one byte over")
}
