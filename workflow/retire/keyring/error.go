package keyring

import "fmt"

// Reasons carried by [Error]. They are stable: tests and operators match them.
const (
	// ReasonTooLarge: the manifest is larger than MaxManifestBytes.
	ReasonTooLarge = "too-large"
	// ReasonMalformed: not JSON, wrong JSON types, duplicate or unknown
	// members, missing members, or data after the manifest.
	ReasonMalformed = "malformed"
	// ReasonNonCanonical: valid content that is not in canonical form.
	ReasonNonCanonical = "non-canonical"
	// ReasonUnsupportedSchema: the schema member is not Schema.
	ReasonUnsupportedSchema = "unsupported-schema"
	// ReasonTooManyKeys: more than MaxKeys keys.
	ReasonTooManyKeys = "too-many-keys"
	// ReasonTooManyRetirements: more than MaxRetirements receipts, or a
	// retirement that would exceed it.
	ReasonTooManyRetirements = "too-many-retirements"
	// ReasonInvalidField: a field breaks its format rule; Detail names it.
	ReasonInvalidField = "invalid-field"
	// ReasonDuplicateKeyID: two keys share an id.
	ReasonDuplicateKeyID = "duplicate-key-id"
	// ReasonUnknownActiveKey: activeKeyId names no current key.
	ReasonUnknownActiveKey = "unknown-active-key"
	// ReasonRetiredKeyPresent: a receipt names a key that is still present.
	ReasonRetiredKeyPresent = "retired-key-present"
	// ReasonDuplicateRetirementID: two receipts share a retirementId, or a
	// retirement reuses one.
	ReasonDuplicateRetirementID = "duplicate-retirement-id"
	// ReasonDuplicateRetiredKey: two receipts name the same key.
	ReasonDuplicateRetiredKey = "duplicate-retired-key"
	// ReasonKeyAbsent: the key to retire is not in the manifest.
	ReasonKeyAbsent = "key-absent"
	// ReasonKeyActive: the key to retire is the active key.
	ReasonKeyActive = "key-active"
	// ReasonMaterialDigestMismatch: the key to retire does not hold the
	// material the caller expected.
	ReasonMaterialDigestMismatch = "material-digest-mismatch"
	// ReasonGenerationOverflow: the generation cannot be incremented.
	ReasonGenerationOverflow = "generation-overflow"
)

// Reasons lists every reason an [Error] may carry.
func Reasons() []string {
	return []string{
		ReasonTooLarge, ReasonMalformed, ReasonNonCanonical, ReasonUnsupportedSchema,
		ReasonTooManyKeys, ReasonTooManyRetirements, ReasonInvalidField,
		ReasonDuplicateKeyID, ReasonUnknownActiveKey, ReasonRetiredKeyPresent,
		ReasonDuplicateRetirementID, ReasonDuplicateRetiredKey, ReasonKeyAbsent,
		ReasonKeyActive, ReasonMaterialDigestMismatch, ReasonGenerationOverflow,
	}
}

// Error is a refusal. Reason is one of the Reason* constants; Detail names
// the field or explains the refusal and never contains key material.
type Error struct {
	Reason string
	Detail string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return "keyring: " + e.Reason
	}
	return "keyring: " + e.Reason + ": " + e.Detail
}

// Is reports whether target is an *Error with the same Reason, so that
// errors.Is(err, &keyring.Error{Reason: keyring.ReasonKeyActive}) works.
// A target Detail, when set, must match too.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t.Reason == e.Reason && (t.Detail == "" || t.Detail == e.Detail)
}

func refuse(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}
