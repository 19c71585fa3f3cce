package keyring

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// Limits and fixed values of the manifest format.
const (
	// Schema is the only schema this package reads and writes.
	Schema = "keyledger.dev/keyring/v1"
	// MaxManifestBytes is the largest manifest accepted (256 KiB).
	MaxManifestBytes = 256 << 10
	// MaxSecretBytes is the largest keyring Secret accepted as a whole
	// (256 KiB, ADR-0262): its data keys and values, label and annotation
	// keys and values, and name, counted as stored. A Secret within it
	// whose manifest is within MaxManifestBytes may still carry 256 KiB
	// of annotations beside it; this bound closes that.
	MaxSecretBytes = 256 << 10
	// MaxKeys is the most keys a manifest may hold.
	MaxKeys = 16
	// MaxRetirements is the most retirement receipts a manifest may hold.
	MaxRetirements = 64
	// MaterialSize is the length of every key's raw material.
	MaterialSize = 32
	// TimeLayout is the only accepted form of createdAt and retiredAt.
	TimeLayout = "2006-01-02T15:04:05Z"
	// DigestPrefix starts every materialDigest and the catalog digest.
	DigestPrefix = "sha256:"
)

// Manifest is a decoded keyring manifest. Keys must be sorted by ID to be
// canonical (see [Manifest.Canonicalize]); Retirements are in append order.
type Manifest struct {
	Schema      string
	Generation  int64
	ActiveKeyID string
	Keys        []Key
	Retirements []Retirement
}

// Key is one current key. Material is redacted whenever it is printed.
type Key struct {
	ID        string
	CreatedAt string // TimeLayout, UTC
	Material  Material
}

// Retirement is the receipt left behind when a key is retired. It holds the
// digest of the material, never the material.
type Retirement struct {
	KeyID          string
	RetirementID   string
	RequestID      string
	MutationID     string
	MaterialDigest string
	Generation     int64
	RetiredAt      string // TimeLayout, UTC
}

// MaterialDigest returns "sha256:" and the lowercase hex SHA-256 of the raw
// material bytes.
func MaterialDigest(material []byte) string {
	sum := sha256.Sum256(material)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// Encode returns the canonical bytes of what m holds, in the order it holds
// it: it does not sort keys and does not validate. Call [Manifest.Validate]
// (or [Manifest.Canonicalize] first) before writing the result anywhere.
func (m *Manifest) Encode() []byte { return m.encode(false) }

// Catalog returns the canonical catalog: the encoding of m with every key's
// "material" member replaced, in the same position, by "materialDigest".
// The catalog contains no material and may be printed and journaled.
func (m *Manifest) Catalog() []byte { return m.encode(true) }

// CatalogDigest returns "sha256:" and the lowercase hex SHA-256 of
// [Manifest.Catalog].
func (m *Manifest) CatalogDigest() string { return MaterialDigest(m.Catalog()) }

// Canonicalize sorts m.Keys by ID (byte order) and turns a nil Retirements
// into an empty list. It changes nothing else.
func (m *Manifest) Canonicalize() {
	slices.SortStableFunc(m.Keys, func(a, b Key) int { return strings.Compare(a.ID, b.ID) })
	if m.Retirements == nil {
		m.Retirements = []Retirement{}
	}
}

// Clone returns a deep copy of m; no material memory is shared.
func (m *Manifest) Clone() *Manifest {
	c := *m
	c.Keys = make([]Key, len(m.Keys))
	for i, k := range m.Keys {
		k.Material = k.Material.clone()
		c.Keys[i] = k
	}
	c.Retirements = slices.Clone(m.Retirements)
	if c.Retirements == nil {
		c.Retirements = []Retirement{}
	}
	return &c
}

// Key returns the current key with the given id.
func (m *Manifest) Key(id string) (Key, bool) {
	for _, k := range m.Keys {
		if k.ID == id {
			return k, true
		}
	}
	return Key{}, false
}

// Receipt returns the retirement receipt for keyID, if the key was retired.
func (m *Manifest) Receipt(keyID string) (Retirement, bool) {
	for _, r := range m.Retirements {
		if r.KeyID == keyID {
			return r, true
		}
	}
	return Retirement{}, false
}

func (m *Manifest) encode(catalog bool) []byte {
	var b bytes.Buffer
	b.Grow(m.encodedSizeHint())
	b.WriteString(`{"schema":`)
	writeString(&b, m.Schema)
	b.WriteString(`,"generation":`)
	b.WriteString(strconv.FormatInt(m.Generation, 10))
	b.WriteString(`,"activeKeyId":`)
	writeString(&b, m.ActiveKeyID)
	b.WriteString(`,"keys":[`)
	for i, k := range m.Keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":`)
		writeString(&b, k.ID)
		b.WriteString(`,"createdAt":`)
		writeString(&b, k.CreatedAt)
		if catalog {
			b.WriteString(`,"materialDigest":`)
			writeString(&b, MaterialDigest(k.Material))
		} else {
			b.WriteString(`,"material":"`)
			b.WriteString(base64.StdEncoding.EncodeToString(k.Material))
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	b.WriteString(`],"retirements":[`)
	for i, r := range m.Retirements {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"keyId":`)
		writeString(&b, r.KeyID)
		b.WriteString(`,"retirementId":`)
		writeString(&b, r.RetirementID)
		b.WriteString(`,"requestId":`)
		writeString(&b, r.RequestID)
		b.WriteString(`,"mutationId":`)
		writeString(&b, r.MutationID)
		b.WriteString(`,"materialDigest":`)
		writeString(&b, r.MaterialDigest)
		b.WriteString(`,"generation":`)
		b.WriteString(strconv.FormatInt(r.Generation, 10))
		b.WriteString(`,"retiredAt":`)
		writeString(&b, r.RetiredAt)
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// encodedSizeHint is about the length of m's encoding (exactly it when no
// string needs escaping), so that encode grows its buffer once.
func (m *Manifest) encodedSizeHint() int {
	n := 128 + len(m.Schema) + len(m.ActiveKeyID)
	for _, k := range m.Keys {
		// Member names and punctuation, and the longer of the material's
		// base64 and its digest (71 bytes).
		n += 48 + len(k.ID) + len(k.CreatedAt) + max(base64.StdEncoding.EncodedLen(len(k.Material)), 71)
	}
	for _, r := range m.Retirements {
		n += 128 + len(r.KeyID) + len(r.RetirementID) + len(r.RequestID) + len(r.MutationID) +
			len(r.MaterialDigest) + len(r.RetiredAt)
	}
	return n
}

// writeString writes s as a JSON string without HTML escaping.
func writeString(b *bytes.Buffer, s string) {
	if plainASCII(s) {
		b.WriteByte('"')
		b.WriteString(s)
		b.WriteByte('"')
		return
	}
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail
	b.Write(bytes.TrimSuffix(tmp.Bytes(), []byte("\n")))
}

// plainASCII reports whether s needs no escaping in a JSON string.
func plainASCII(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
