package retire

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
)

// The records a retirement journals, one type a detail: their JSON form is
// the journal's schema (TestRecordsReadTodaysJournal reads the details
// journaled before they were typed).

// preparationDetail is the preparation record's detail: the key retired
// and the retirement's ID.
type preparationDetail struct {
	KeyID        string `json:"keyId"`
	RetirementID string `json:"retirementId"`
}

// readDetail is the read-keyring observation's detail: the manifest's
// generation and how many keys it holds.
type readDetail struct {
	Generation int64 `json:"generation"`
	Keys       int   `json:"keys"`
}

// replaceDetail is the replace-keyring call's detail: the generation the
// replacement writes.
type replaceDetail struct {
	Generation int64 `json:"generation"`
}

// secretRef names the keyring Secret in a summary.
type secretRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// summaryDetail is the summary of a completion or refusal: the Secret (when
// it was read), its generation (the manifest's, or the annotation's when
// the manifest did not decode) and catalog digest (when it decoded).
type summaryDetail struct {
	Secret        *secretRef `json:"secret,omitempty"`
	Generation    *int64     `json:"generation,omitempty"`
	CatalogDigest string     `json:"catalogDigest,omitempty"`
}

// summary is the content-free description printed on stdout and stored in
// the completion or refusal record; digest is m's catalog digest.
func summary(s *corev1.Secret, m *keyring.Manifest, digest string) store.Detail {
	var out summaryDetail
	if s == nil {
		return store.DetailOf(out)
	}
	out.Secret = &secretRef{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}
	if m != nil {
		out.Generation, out.CatalogDigest = &m.Generation, digest
	} else if g, err := strconv.ParseInt(s.Annotations[AnnotationGeneration], 10, 64); err == nil {
		out.Generation = &g
	}
	return store.DetailOf(out)
}
