package keyring

import (
	"math"
	"time"
)

// RetireParams says which key to retire and how to record it.
type RetireParams struct {
	// KeyID is the key to remove.
	KeyID string
	// ExpectedMaterialDigest is the materialDigest the caller saw for KeyID
	// (from the catalog); the key is retired only if it still matches.
	ExpectedMaterialDigest string
	// RetirementID, RequestID and MutationID are written into the receipt.
	RetirementID string
	RequestID    string
	MutationID   string
	// RetiredAt is written into the receipt in UTC, truncated to the second.
	RetiredAt time.Time
}

// Retire returns a new manifest in which the key p.KeyID is gone, a receipt
// for it is appended and the generation is one higher; the receipt carries
// the new generation. m itself is not changed and the result shares no
// memory with it; the retired key's material is not copied into the result.
//
// Checks, in order: m is valid ([Manifest.Validate]'s reasons); the params
// are well formed (invalid-field, Detail "params.<field>"); the key exists
// (key-absent); it is not the active key (key-active); its material digest
// equals p.ExpectedMaterialDigest (material-digest-mismatch); the
// retirementId is unused (duplicate-retirement-id); there is room for one
// more receipt (too-many-retirements); the generation can grow
// (generation-overflow).
func (m *Manifest) Retire(p RetireParams) (*Manifest, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	retiredAt, err := p.check()
	if err != nil {
		return nil, err
	}
	if err := m.checkRetirable(p); err != nil {
		return nil, err
	}
	next := m.retiring(p, retiredAt)
	if err := next.validate(); err != nil {
		next.wipe()
		return nil, err
	}
	return next, nil
}

// check says whether the params are well formed (invalid-field, Detail
// "params.<field>"), and gives the receipt's retiredAt: UTC, truncated to
// the second.
func (p RetireParams) check() (time.Time, *Error) {
	if err := checkReceiptIDs("params.", p.KeyID, p.RetirementID, p.RequestID, p.MutationID); err != nil {
		return time.Time{}, err
	}
	if !validDigest(p.ExpectedMaterialDigest) {
		return time.Time{}, refuse(ReasonInvalidField, "params.expectedMaterialDigest: must be %q and 64 lowercase hex digits", DigestPrefix)
	}
	retiredAt := p.RetiredAt.UTC().Truncate(time.Second)
	if p.RetiredAt.IsZero() || retiredAt.Year() < 1 || retiredAt.Year() > 9999 {
		return time.Time{}, refuse(ReasonInvalidField, "params.retiredAt: must be a time between years 1 and 9999")
	}
	return retiredAt, nil
}

// checkRetirable says whether m may retire p.KeyID as p asks: the key is
// present (key-absent), not active (key-active), its material is the one
// the caller saw (material-digest-mismatch), the retirementId is unused
// (duplicate-retirement-id), one more receipt fits (too-many-retirements)
// and the generation can grow (generation-overflow).
func (m *Manifest) checkRetirable(p RetireParams) *Error {
	key, ok := m.Key(p.KeyID)
	if !ok {
		return refuse(ReasonKeyAbsent, "%s", p.KeyID)
	}
	if p.KeyID == m.ActiveKeyID {
		return refuse(ReasonKeyActive, "%s", p.KeyID)
	}
	if got := MaterialDigest(key.Material); got != p.ExpectedMaterialDigest {
		return refuse(ReasonMaterialDigestMismatch, "%s: have %s, expected %s", p.KeyID, got, p.ExpectedMaterialDigest)
	}
	for _, r := range m.Retirements {
		if r.RetirementID == p.RetirementID {
			return refuse(ReasonDuplicateRetirementID, "%s already retired %s", p.RetirementID, r.KeyID)
		}
	}
	if len(m.Retirements) >= MaxRetirements {
		return refuse(ReasonTooManyRetirements, "already %d retirements, at most %d", len(m.Retirements), MaxRetirements)
	}
	if m.Generation == math.MaxInt64 {
		return refuse(ReasonGenerationOverflow, "generation %d", m.Generation)
	}
	return nil
}

// retiring is m's successor once p.KeyID is retired: one generation
// higher, every other key copied (the retired key's material never is),
// and the receipt appended, carrying the new generation.
func (m *Manifest) retiring(p RetireParams, retiredAt time.Time) *Manifest {
	next := &Manifest{
		Schema:      m.Schema,
		Generation:  m.Generation + 1,
		ActiveKeyID: m.ActiveKeyID,
		Keys:        make([]Key, 0, len(m.Keys)-1),
		Retirements: make([]Retirement, 0, len(m.Retirements)+1),
	}
	for _, k := range m.Keys {
		if k.ID == p.KeyID {
			continue // the retired key's material is never copied
		}
		k.Material = k.Material.clone()
		next.Keys = append(next.Keys, k)
	}
	next.Retirements = append(next.Retirements, m.Retirements...)
	next.Retirements = append(next.Retirements, Retirement{
		KeyID:          p.KeyID,
		RetirementID:   p.RetirementID,
		RequestID:      p.RequestID,
		MutationID:     p.MutationID,
		MaterialDigest: p.ExpectedMaterialDigest,
		Generation:     next.Generation,
		RetiredAt:      retiredAt.Format(TimeLayout),
	})
	return next
}
