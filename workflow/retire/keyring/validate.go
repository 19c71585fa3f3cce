package keyring

import (
	"fmt"
	"strings"
	"time"
)

// MaxIdentifierLen is the longest key id, retirementId, requestId or mutationId.
const MaxIdentifierLen = 128

// Validate checks every rule of the manifest format except the byte-level
// ones that only [Parse] can see (whitespace, member order, duplicate
// members). It returns nil or an [*Error]. A manifest that passes Validate
// encodes to bytes that [Parse] accepts.
func (m *Manifest) Validate() error {
	if err := m.validate(); err != nil {
		return err
	}
	return nil
}

// validateMembers is every rule of Validate but the size of the encoding.
func (m *Manifest) validateMembers() *Error {
	if err := m.checkHeader(); err != nil {
		return err
	}
	keyIDs, err := m.checkKeys()
	if err != nil {
		return err
	}
	if !keyIDs[m.ActiveKeyID] {
		return refuse(ReasonUnknownActiveKey, "activeKeyId: %s", m.ActiveKeyID)
	}
	return m.checkRetirements(keyIDs)
}

// checkHeader checks the members around the lists: the schema, the
// generation, how many keys and receipts, the active key's id.
func (m *Manifest) checkHeader() *Error {
	if m.Schema != Schema {
		return refuse(ReasonUnsupportedSchema, "schema must be %q", Schema)
	}
	if m.Generation < 0 {
		return refuse(ReasonInvalidField, "generation: must not be negative")
	}
	if len(m.Keys) > MaxKeys {
		return refuse(ReasonTooManyKeys, "%d keys, at most %d", len(m.Keys), MaxKeys)
	}
	if len(m.Retirements) > MaxRetirements {
		return refuse(ReasonTooManyRetirements, "%d retirements, at most %d", len(m.Retirements), MaxRetirements)
	}
	return checkIdentifier("activeKeyId", m.ActiveKeyID)
}

// checkKeys checks each key (id, createdAt, material size), that no id is
// repeated and that the keys are sorted by id; it returns the ids.
func (m *Manifest) checkKeys() (map[string]bool, *Error) {
	keyIDs := make(map[string]bool, len(m.Keys))
	for i, k := range m.Keys {
		field := fmt.Sprintf("keys[%d]", i)
		if err := checkIdentifier(field+".id", k.ID); err != nil {
			return nil, err
		}
		if err := checkTimestamp(field+".createdAt", k.CreatedAt); err != nil {
			return nil, err
		}
		if len(k.Material) != MaterialSize {
			return nil, refuse(ReasonInvalidField, "%s.material: must be %d bytes", field, MaterialSize)
		}
		if keyIDs[k.ID] {
			return nil, refuse(ReasonDuplicateKeyID, "%s.id: %s", field, k.ID)
		}
		keyIDs[k.ID] = true
		if i > 0 && m.Keys[i-1].ID > k.ID {
			return nil, refuse(ReasonNonCanonical, "%s.id: keys are not sorted by id", field)
		}
	}
	return keyIDs, nil
}

// checkRetirements checks each receipt (checkReceipt), in rising
// generations, and that none names a current key (keyIDs), a key retired
// before or a retirementId used before.
func (m *Manifest) checkRetirements(keyIDs map[string]bool) *Error {
	retirementIDs := make(map[string]bool, len(m.Retirements))
	retiredKeys := make(map[string]bool, len(m.Retirements))
	var lastGeneration int64
	for i, r := range m.Retirements {
		field := fmt.Sprintf("retirements[%d]", i)
		if err := m.checkReceipt(field, r, lastGeneration); err != nil {
			return err
		}
		lastGeneration = r.Generation
		if keyIDs[r.KeyID] {
			return refuse(ReasonRetiredKeyPresent, "%s.keyId: %s is still a current key", field, r.KeyID)
		}
		if retiredKeys[r.KeyID] {
			return refuse(ReasonDuplicateRetiredKey, "%s.keyId: %s", field, r.KeyID)
		}
		retiredKeys[r.KeyID] = true
		if retirementIDs[r.RetirementID] {
			return refuse(ReasonDuplicateRetirementID, "%s.retirementId: %s", field, r.RetirementID)
		}
		retirementIDs[r.RetirementID] = true
	}
	return nil
}

// checkReceipt checks one receipt on its own: its identifiers, its
// material digest, a generation within the manifest's and above the
// previous receipt's (last), its retiredAt.
func (m *Manifest) checkReceipt(field string, r Retirement, last int64) *Error {
	if err := checkReceiptIDs(field+".", r.KeyID, r.RetirementID, r.RequestID, r.MutationID); err != nil {
		return err
	}
	if !validDigest(r.MaterialDigest) {
		return refuse(ReasonInvalidField, "%s.materialDigest: must be %q and 64 lowercase hex digits", field, DigestPrefix)
	}
	if r.Generation < 1 || r.Generation > m.Generation {
		return refuse(ReasonInvalidField, "%s.generation: must be between 1 and the manifest generation %d", field, m.Generation)
	}
	if r.Generation <= last {
		return refuse(ReasonInvalidField, "%s.generation: must be greater than the previous receipt's %d", field, last)
	}
	return checkTimestamp(field+".retiredAt", r.RetiredAt)
}

// checkReceiptIDs checks the identifiers a receipt carries (a receipt's,
// or the params of the retirement that writes one), each field named
// prefix+its member name.
func checkReceiptIDs(prefix, keyID, retirementID, requestID, mutationID string) *Error {
	for _, f := range []struct{ name, value string }{
		{"keyId", keyID},
		{"retirementId", retirementID},
		{"requestId", requestID},
		{"mutationId", mutationID},
	} {
		if err := checkIdentifier(prefix+f.name, f.value); err != nil {
			return err
		}
	}
	return nil
}

// validate is every rule of Validate: the members' rules
// (validateMembers), then the size of the encoding.
func (m *Manifest) validate() *Error {
	if err := m.validateMembers(); err != nil {
		return err
	}
	if n := len(m.encode(false)); n > MaxManifestBytes {
		return refuse(ReasonTooLarge, "%d bytes, at most %d", n, MaxManifestBytes)
	}
	return nil
}

// ValidIdentifier reports whether s is 1 to 128 characters of [A-Za-z0-9._:-].
func ValidIdentifier(s string) bool {
	if len(s) == 0 || len(s) > MaxIdentifierLen {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

func checkIdentifier(field, s string) *Error {
	if !ValidIdentifier(s) {
		// The value is not echoed: it failed the identifier rule, so nothing
		// is known about what it holds.
		return refuse(ReasonInvalidField, "%s: must be 1 to %d characters of [A-Za-z0-9._:-]", field, MaxIdentifierLen)
	}
	return nil
}

// checkTimestamp accepts exactly TimeLayout. Other valid RFC 3339 forms are
// non-canonical; anything else is an invalid field.
func checkTimestamp(field, s string) *Error {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return refuse(ReasonInvalidField, "%s: must be an RFC 3339 time like %s", field, TimeLayout)
	}
	if t.UTC().Format(TimeLayout) != s {
		return refuse(ReasonNonCanonical, "%s: must be UTC at second precision like %s", field, TimeLayout)
	}
	return nil
}

func validDigest(s string) bool {
	hexPart, ok := strings.CutPrefix(s, DigestPrefix)
	if !ok || len(hexPart) != 64 {
		return false
	}
	for i := range len(hexPart) {
		c := hexPart[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
