// Package keyringtest builds keyring manifests for tests in any package, in
// the style of cert-manager's fixture generators:
//
//	m := keyringtest.New(
//		keyringtest.WithKey("k-2026-07", "2026-07-01T00:00:00Z", keyringtest.Material("k-2026-07")),
//		keyringtest.WithKey("k-2026-08", "2026-08-01T00:00:00Z", keyringtest.Material("k-2026-08")),
//		keyringtest.WithActive("k-2026-08"),
//	)
//
// Material is deterministic but random-looking, so it cannot be made
// greppable by eye; tests that check output for leaks look for every form
// in [Forms] (the base64 written in the manifest, hex, and the raw bytes),
// which [AssertNoMaterial] does.
package keyringtest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/keyledger/keyledger/workflow/retire/keyring"
)

// Option modifies a manifest under construction. Any func(*keyring.Manifest)
// works, so a test can write its own.
type Option func(*keyring.Manifest)

// New returns a manifest with schema keyring.Schema, generation 1 and no
// receipts, applies opts in order and then sorts the keys by id. It does not
// validate: tests may build invalid manifests on purpose.
func New(opts ...Option) *keyring.Manifest {
	m := &keyring.Manifest{
		Schema:      keyring.Schema,
		Generation:  1,
		Keys:        []keyring.Key{},
		Retirements: []keyring.Retirement{},
	}
	for _, opt := range opts {
		opt(m)
	}
	m.Canonicalize()
	return m
}

// WithKey adds a key. createdAt should be keyring.TimeLayout; material is
// copied.
func WithKey(id, createdAt string, material []byte) Option {
	return func(m *keyring.Manifest) {
		m.Keys = append(m.Keys, keyring.Key{
			ID:        id,
			CreatedAt: createdAt,
			Material:  append(keyring.Material(nil), material...),
		})
	}
}

// WithActive sets activeKeyId.
func WithActive(id string) Option {
	return func(m *keyring.Manifest) { m.ActiveKeyID = id }
}

// WithGeneration sets the generation.
func WithGeneration(n int64) Option {
	return func(m *keyring.Manifest) { m.Generation = n }
}

// WithSchema sets the schema (to build unsupported manifests).
func WithSchema(s string) Option {
	return func(m *keyring.Manifest) { m.Schema = s }
}

// WithRetirement appends a receipt as given.
func WithRetirement(r keyring.Retirement) Option {
	return func(m *keyring.Manifest) { m.Retirements = append(m.Retirements, r) }
}

// Receipt returns a receipt for keyID whose retirementId, requestId and
// mutationId are derived from keyID ("ret-", "req-", "mut-" + keyID) and
// whose materialDigest is that of Material(keyID).
func Receipt(keyID string, generation int64, retiredAt string) keyring.Retirement {
	return keyring.Retirement{
		KeyID:          keyID,
		RetirementID:   "ret-" + keyID,
		RequestID:      "req-" + keyID,
		MutationID:     "mut-" + keyID,
		MaterialDigest: keyring.MaterialDigest(Material(keyID)),
		Generation:     generation,
		RetiredAt:      retiredAt,
	}
}

// Material returns 32 deterministic bytes: the SHA-256 of seed.
func Material(seed string) []byte {
	sum := sha256.Sum256([]byte(seed))
	return sum[:]
}

// Forms returns the encodings in which material must never appear in output:
// standard base64 (as in the manifest), unpadded and URL base64, lowercase
// hex, and the raw bytes.
func Forms(material []byte) []string {
	return []string{
		base64.StdEncoding.EncodeToString(material),
		base64.RawStdEncoding.EncodeToString(material),
		base64.URLEncoding.EncodeToString(material),
		hex.EncodeToString(material),
		string(material),
	}
}

// AssertNoMaterial fails t if output contains any of [Forms] of any of
// materials. The failure message names the form, never the material.
func AssertNoMaterial(t testing.TB, output string, materials ...[]byte) {
	t.Helper()
	names := []string{"base64", "raw base64", "url base64", "hex", "raw bytes"}
	for i, mat := range materials {
		for j, form := range Forms(mat) {
			if strings.Contains(output, form) {
				t.Errorf("output contains material #%d as %s", i, names[j])
			}
		}
	}
}
