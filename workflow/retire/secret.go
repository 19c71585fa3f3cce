package retire

import (
	"bytes"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/workflow/retire/keyring"
)

// The metadata a keyring Secret carries.
const (
	// LabelKeyring marks a Secret as a keyring keyledger manages.
	LabelKeyring = "keyledger.dev/keyring"
	// LabelKeyringManaged is LabelKeyring's only accepted value.
	LabelKeyringManaged = "managed"
	// AnnotationGeneration repeats the manifest's generation.
	AnnotationGeneration = "keyledger.dev/generation"
	// AnnotationCatalogDigest repeats the manifest's catalog digest.
	AnnotationCatalogDigest = "keyledger.dev/catalog-digest"
	// annotationLastApplied would hold a copy of the material.
	annotationLastApplied = "kubectl.kubernetes.io/last-applied-configuration"
)

// Reasons a keyring Secret is refused (beyond keyring.Reasons).
const (
	ReasonSecretAbsent      = "secret-absent"
	ReasonUIDChanged        = "uid-changed"
	ReasonWrongType         = "wrong-type"
	ReasonImmutable         = "immutable"
	ReasonDataEntries       = "data-entries"
	ReasonNotManaged        = "not-managed"
	ReasonCatalogDrifted    = "catalog-drifted"
	ReasonTerminating       = "terminating"
	ReasonLastApplied       = "last-applied-present"
	ReasonReceiptConflict   = "receipt-conflict"
	ReasonChangedConcurrent = "changed-concurrently"
	ReasonResultMismatch    = "result-mismatch"
)

// refusal is a fail-closed finding about the Secret.
type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

// decodeKeyring checks that s is a valid keyring Secret for spec and decodes
// its manifest. Every refusal is a *refusal, or the manifest's
// *keyring.Error, each with a stable reason (reasonOf).
func decodeKeyring(s *corev1.Secret, spec Spec) (*keyring.Manifest, error) {
	m, _, err := readCatalog(s, spec)
	return m, err
}

// readCatalog is readKeyring that also returns the manifest's catalog
// digest, which it computes to compare with the Secret's annotation: a
// run needs it several times, and it costs a canonical encoding and a
// SHA-256 of the whole manifest each time.
func readCatalog(s *corev1.Secret, spec Spec) (*keyring.Manifest, string, error) {
	data, err := keyringData(s, spec)
	if err != nil {
		return nil, "", err
	}
	m, err := keyring.Parse(data)
	if err != nil {
		return nil, "", err
	}
	digest := m.CatalogDigest()
	if s.Annotations[AnnotationGeneration] != strconv.FormatInt(m.Generation, 10) ||
		s.Annotations[AnnotationCatalogDigest] != digest {
		return nil, "", &refusal{ReasonCatalogDrifted}
	}
	return m, digest, nil
}

// writtenCatalog is readCatalog's digest for got, the Secret a replace of
// sent (withManifest's) returned. When got passes readCatalog's checks of
// the Secret and holds, byte for byte, the manifest sent and its two
// annotations, the digest is the one sent, and the manifest is not
// decoded again: sent's manifest was validated before it was encoded
// (keyring.Manifest.Retire), a validated manifest's encoding is one
// keyring.Parse accepts as that manifest, and the annotations are its
// generation and catalog digest (withManifest). Otherwise got is read as
// readCatalog reads it.
func writtenCatalog(got, sent *corev1.Secret, spec Spec) (string, error) {
	data, err := keyringData(got, spec)
	if err != nil {
		return "", err
	}
	if bytes.Equal(data, sent.Data[spec.DataKey]) &&
		got.Annotations[AnnotationGeneration] == sent.Annotations[AnnotationGeneration] &&
		got.Annotations[AnnotationCatalogDigest] == sent.Annotations[AnnotationCatalogDigest] {
		return sent.Annotations[AnnotationCatalogDigest], nil
	}
	_, digest, err := readCatalog(got, spec)
	return digest, err
}

// keyringData checks everything readCatalog checks of s but its manifest,
// and returns the manifest's bytes.
func keyringData(s *corev1.Secret, spec Spec) ([]byte, error) {
	switch {
	case string(s.UID) != spec.ExpectedUID:
		return nil, &refusal{ReasonUIDChanged}
	case s.DeletionTimestamp != nil:
		return nil, &refusal{ReasonTerminating}
	case s.Type != corev1.SecretTypeOpaque:
		return nil, &refusal{ReasonWrongType}
	case secretBytes(s) > keyring.MaxSecretBytes:
		return nil, &refusal{keyring.ReasonTooLarge}
	case s.Immutable != nil && *s.Immutable:
		return nil, &refusal{ReasonImmutable}
	case len(s.Data) != 1 || len(s.StringData) != 0:
		return nil, &refusal{ReasonDataEntries}
	case s.Labels[LabelKeyring] != LabelKeyringManaged:
		return nil, &refusal{ReasonNotManaged}
	}
	if _, ok := s.Annotations[annotationLastApplied]; ok {
		return nil, &refusal{ReasonLastApplied}
	}
	data, ok := s.Data[spec.DataKey]
	if !ok {
		return nil, &refusal{ReasonDataEntries}
	}
	return data, nil
}

// secretBytes is the size of s as keyring.MaxSecretBytes bounds it: data
// keys and values, label and annotation keys and values, and the name.
func secretBytes(s *corev1.Secret) int {
	n := len(s.Name)
	for k, v := range s.Data {
		n += len(k) + len(v)
	}
	for k, v := range s.Labels {
		n += len(k) + len(v)
	}
	for k, v := range s.Annotations {
		n += len(k) + len(v)
	}
	return n
}

// withManifest returns a copy of s carrying m, its annotations updated in the
// same object, and s's resourceVersion as the compare-and-set precondition.
// The catalog digest annotation is m's, computed once here.
func withManifest(s *corev1.Secret, dataKey string, m *keyring.Manifest) *corev1.Secret {
	out := s.DeepCopy()
	out.Data = map[string][]byte{dataKey: m.Encode()}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[AnnotationGeneration] = strconv.FormatInt(m.Generation, 10)
	out.Annotations[AnnotationCatalogDigest] = m.CatalogDigest()
	out.ManagedFields = nil
	return out
}
