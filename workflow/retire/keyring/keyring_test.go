package keyring_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/retire/keyring/keyringtest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden")

// standard is the known manifest behind testdata/golden: two current keys,
// one already retired.
func standard() *keyring.Manifest {
	return keyringtest.New(
		keyringtest.WithGeneration(4),
		keyringtest.WithKey("k-2026-08", "2026-08-01T00:00:00Z", keyringtest.Material("k-2026-08")),
		keyringtest.WithKey("k-2026-07", "2026-07-01T00:00:00Z", keyringtest.Material("k-2026-07")),
		keyringtest.WithActive("k-2026-08"),
		keyringtest.WithRetirement(keyringtest.Receipt("k-2026-06", 4, "2026-07-15T12:30:00Z")),
	)
}

// allMaterial is every material that standard() and the cases below use.
func allMaterial() [][]byte {
	return [][]byte{
		keyringtest.Material("k-2026-06"),
		keyringtest.Material("k-2026-07"),
		keyringtest.Material("k-2026-08"),
	}
}

func requireReason(t *testing.T, err error, reason string) *keyring.Error {
	t.Helper()
	require.Error(t, err)
	var kerr *keyring.Error
	require.ErrorAs(t, err, &kerr)
	require.Equal(t, reason, kerr.Reason, "error: %v", err)
	require.ErrorIs(t, err, &keyring.Error{Reason: reason})
	return kerr
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

func TestGolden(t *testing.T) {
	t.Parallel()
	m := standard()
	require.NoError(t, m.Validate())
	golden(t, "manifest.json", m.Encode())
	golden(t, "catalog.json", m.Catalog())
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "manifest.json"))
	require.NoError(t, err)
	m, err := keyring.Parse(data)
	require.NoError(t, err)
	require.Equal(t, standard(), m)
	require.Equal(t, data, m.Encode())

	// The smallest valid manifest: generation 0, one key, no receipts.
	small := keyringtest.New(
		keyringtest.WithGeneration(0),
		keyringtest.WithKey("a", "0001-01-01T00:00:00Z", keyringtest.Material("a")),
		keyringtest.WithActive("a"),
	)
	enc := small.Encode()
	require.Contains(t, string(enc), `"retirements":[]}`)
	back, err := keyring.Parse(enc)
	require.NoError(t, err)
	require.Equal(t, enc, back.Encode())
}

func TestEncodeEmptyRetirementsIsArray(t *testing.T) {
	t.Parallel()
	m := standard()
	m.Retirements = nil
	require.True(t, strings.HasSuffix(string(m.Encode()), `"retirements":[]}`))
}

func TestEncodeDoesNotEscapeHTML(t *testing.T) {
	t.Parallel()
	m := standard()
	m.Schema = "<a&b>"
	require.Contains(t, string(m.Encode()), `{"schema":"<a&b>",`)
	require.Contains(t, string(m.Catalog()), `{"schema":"<a&b>",`)
}

func TestEncodeEscapesWhatJSONRequires(t *testing.T) {
	t.Parallel()
	m := standard()
	m.Schema = "a\"b\\c\nd\u00e9\u2028<"
	enc := m.Encode()
	require.True(t, json.Valid(enc))
	var back struct{ Schema string }
	require.NoError(t, json.Unmarshal(enc, &back))
	require.Equal(t, m.Schema, back.Schema)
	require.Contains(t, string(enc), `"a\"b\\c\ndé\u2028<"`)
}

func TestEncodeKeepsOrderCanonicalizeSorts(t *testing.T) {
	t.Parallel()
	m := standard()
	m.Keys[0], m.Keys[1] = m.Keys[1], m.Keys[0]
	enc := m.Encode()
	require.Less(t, bytes.Index(enc, []byte(`"k-2026-08"`+`,"createdAt"`)), bytes.Index(enc, []byte(`"k-2026-07"`)))
	requireReason(t, m.Validate(), keyring.ReasonNonCanonical)
	_, err := keyring.Parse(enc)
	requireReason(t, err, keyring.ReasonNonCanonical)

	m.Canonicalize()
	require.Equal(t, standard().Encode(), m.Encode())
}

func TestCatalogReplacesMaterialInPlace(t *testing.T) {
	t.Parallel()
	m := standard()
	want := m.Encode()
	for _, k := range m.Keys {
		b64 := base64.StdEncoding.EncodeToString(k.Material)
		want = bytes.Replace(want,
			[]byte(`,"material":"`+b64+`"}`),
			[]byte(`,"materialDigest":"`+keyring.MaterialDigest(k.Material)+`"}`), 1)
	}
	catalog := m.Catalog()
	require.Equal(t, string(want), string(catalog))
	require.NotContains(t, string(catalog), `"material"`)
	keyringtest.AssertNoMaterial(t, string(catalog), allMaterial()...)
	require.True(t, json.Valid(catalog))
}

func TestCatalogDigestIsStable(t *testing.T) {
	t.Parallel()
	m := standard()
	catalog, err := os.ReadFile(filepath.Join("testdata", "golden", "catalog.json"))
	require.NoError(t, err)
	require.Equal(t, keyring.MaterialDigest(catalog), m.CatalogDigest())
	require.Equal(t, m.CatalogDigest(), standard().CatalogDigest())
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, m.CatalogDigest())
	// Pinned: a change here changes every journaled catalog digest.
	require.Equal(t, "sha256:"+goldenCatalogDigest, m.CatalogDigest())
}

const goldenCatalogDigest = "16e48c1f0b304be348d4f8a6581f6c3fcf36287629188703bef8267b0f15bb54"

func TestMaterialDigest(t *testing.T) {
	t.Parallel()
	// sha256 of the empty input.
	require.Equal(t, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", keyring.MaterialDigest(nil))
}

type parseCase struct {
	name   string
	data   func() []byte
	reason string
	detail string // substring of Detail, when set
}

// mutate returns the canonical encoding of standard() after change.
func mutate(change func(m *keyring.Manifest)) func() []byte {
	return func() []byte {
		m := standard()
		change(m)
		return m.Encode()
	}
}

// replace returns the golden manifest bytes with old replaced by new once.
func replace(old, new string) func() []byte {
	return func() []byte {
		data := standard().Encode()
		if !bytes.Contains(data, []byte(old)) {
			panic("test case: " + old + " not in manifest")
		}
		return bytes.Replace(data, []byte(old), []byte(new), 1)
	}
}

func key(id string) keyring.Key {
	return keyring.Key{ID: id, CreatedAt: "2026-01-01T00:00:00Z", Material: keyringtest.Material(id)}
}

func parseCases() []parseCase {
	b64 := base64.StdEncoding.EncodeToString(keyringtest.Material("k-2026-07"))
	return []parseCase{
		{name: "too large", reason: keyring.ReasonTooLarge, data: func() []byte {
			return append(standard().Encode(), bytes.Repeat([]byte(" "), keyring.MaxManifestBytes)...)
		}},
		{name: "too large by one byte of padding", reason: keyring.ReasonTooLarge, data: func() []byte {
			return bytes.Repeat([]byte("x"), keyring.MaxManifestBytes+1)
		}},
		{name: "empty", reason: keyring.ReasonMalformed, data: func() []byte { return nil }},
		{name: "not json", reason: keyring.ReasonMalformed, data: func() []byte { return []byte("schema: v1") }},
		{name: "array", reason: keyring.ReasonMalformed, data: func() []byte { return []byte("[]") }},
		{name: "null", reason: keyring.ReasonMalformed, data: func() []byte { return []byte("null") }},
		{name: "truncated", reason: keyring.ReasonMalformed, data: func() []byte {
			d := standard().Encode()
			return d[:len(d)-1]
		}},
		{name: "trailing data", reason: keyring.ReasonMalformed, detail: "data after", data: func() []byte {
			return append(standard().Encode(), "{}"...)
		}},
		{name: "trailing garbage", reason: keyring.ReasonMalformed, data: func() []byte {
			return append(standard().Encode(), "x"...)
		}},
		{name: "duplicate top-level member", reason: keyring.ReasonMalformed, detail: `duplicate member "generation"`,
			data: replace(`"generation":4,`, `"generation":4,"generation":4,`)},
		{name: "duplicate key member", reason: keyring.ReasonMalformed, detail: `keys[0]: duplicate member "id"`,
			data: replace(`{"id":"k-2026-07",`, `{"id":"k-2026-07","id":"k-2026-07",`)},
		{name: "unknown member", reason: keyring.ReasonMalformed, detail: `unknown member "extra"`,
			data: replace(`"generation":4,`, `"generation":4,"extra":1,`)},
		{name: "unknown member in receipt", reason: keyring.ReasonMalformed, detail: "retirements[0]: unknown member",
			data: replace(`{"keyId":`, `{"note":"x","keyId":`)},
		{name: "missing member", reason: keyring.ReasonMalformed, detail: `missing member "activeKeyId"`,
			data: replace(`"activeKeyId":"k-2026-08",`, ``)},
		{name: "missing retirements", reason: keyring.ReasonMalformed, detail: `missing member "retirements"`,
			data: func() []byte {
				d := standard().Encode()
				i := bytes.Index(d, []byte(`,"retirements"`))
				return append(d[:i:i], '}')
			}},
		{name: "null retirements", reason: keyring.ReasonMalformed, detail: "retirements: must be an array",
			data: func() []byte {
				d := standard().Encode()
				i := bytes.Index(d, []byte(`"retirements":`))
				return append(d[:i:i], `"retirements":null}`...)
			}},
		{name: "generation is a string", reason: keyring.ReasonMalformed, detail: "generation: must be a number",
			data: replace(`"generation":4,`, `"generation":"4",`)},
		{name: "id is a number", reason: keyring.ReasonMalformed, detail: "keys[0].id: must be a string",
			data: replace(`{"id":"k-2026-07"`, `{"id":7`)},
		{name: "whitespace", reason: keyring.ReasonNonCanonical,
			data: replace(`"generation":4,`, `"generation": 4,`)},
		{name: "trailing newline", reason: keyring.ReasonNonCanonical, data: func() []byte {
			return append(standard().Encode(), '\n')
		}},
		{name: "member order", reason: keyring.ReasonNonCanonical,
			data: replace(`"schema":"keyledger.dev/keyring/v1","generation":4`, `"generation":4,"schema":"keyledger.dev/keyring/v1"`)},
		{name: "keys not sorted", reason: keyring.ReasonNonCanonical, detail: "not sorted", data: mutate(func(m *keyring.Manifest) {
			m.Keys[0], m.Keys[1] = m.Keys[1], m.Keys[0]
		})},
		{name: "escaped character", reason: keyring.ReasonNonCanonical,
			data: replace(`"k-2026-07"`, `"k\u002d2026-07"`)},
		{name: "negative zero generation", reason: keyring.ReasonNonCanonical, data: func() []byte {
			m := standard()
			m.Generation = 0
			m.Retirements = nil
			return bytes.Replace(m.Encode(), []byte(`"generation":0,`), []byte(`"generation":-0,`), 1)
		}},
		{name: "fractional seconds", reason: keyring.ReasonNonCanonical, detail: "keys[0].createdAt",
			data: replace(`"2026-07-01T00:00:00Z"`, `"2026-07-01T00:00:00.5Z"`)},
		{name: "offset instead of Z", reason: keyring.ReasonNonCanonical, detail: "retirements[0].retiredAt",
			data: replace(`"2026-07-15T12:30:00Z"`, `"2026-07-15T14:30:00+02:00"`)},
		{name: "newline inside material", reason: keyring.ReasonNonCanonical,
			data: replace(b64, b64[:10]+`\n`+b64[10:])},
		{name: "unsupported schema", reason: keyring.ReasonUnsupportedSchema,
			data: replace(`keyring/v1`, `keyring/v2`)},
		{name: "too many keys", reason: keyring.ReasonTooManyKeys, data: mutate(func(m *keyring.Manifest) {
			for i := range keyring.MaxKeys {
				m.Keys = append(m.Keys, key(fmt.Sprintf("k-x-%02d", i)))
			}
		})},
		{name: "too many retirements", reason: keyring.ReasonTooManyRetirements, data: mutate(func(m *keyring.Manifest) {
			m.Generation = 100
			for i := range keyring.MaxRetirements {
				m.Retirements = append(m.Retirements, keyringtest.Receipt(fmt.Sprintf("old-%02d", i), int64(5+i), "2026-07-15T12:30:00Z"))
			}
		})},
		{name: "negative generation", reason: keyring.ReasonInvalidField, detail: "generation",
			data: mutate(func(m *keyring.Manifest) { m.Generation = -1 })},
		{name: "fractional generation", reason: keyring.ReasonInvalidField, detail: "generation",
			data: replace(`"generation":4,`, `"generation":4.5,`)},
		{name: "exponent generation", reason: keyring.ReasonInvalidField, detail: "generation",
			data: replace(`"generation":4,`, `"generation":4e0,`)},
		{name: "huge generation", reason: keyring.ReasonInvalidField, detail: "generation",
			data: replace(`"generation":4,`, `"generation":9223372036854775808,`)},
		{name: "empty active key id", reason: keyring.ReasonInvalidField, detail: "activeKeyId",
			data: mutate(func(m *keyring.Manifest) { m.ActiveKeyID = "" })},
		{name: "key id with space", reason: keyring.ReasonInvalidField, detail: "keys[0].id",
			data: mutate(func(m *keyring.Manifest) { m.Keys[0].ID = "k 2026" })},
		{name: "key id with html", reason: keyring.ReasonInvalidField, detail: "keys[0].id",
			data: mutate(func(m *keyring.Manifest) { m.Keys[0].ID = "<k>" })},
		{name: "key id too long", reason: keyring.ReasonInvalidField, detail: "keys[0].id",
			data: mutate(func(m *keyring.Manifest) { m.Keys[0].ID = "a" + strings.Repeat("b", 128) })},
		{name: "createdAt not a time", reason: keyring.ReasonInvalidField, detail: "keys[1].createdAt",
			data: mutate(func(m *keyring.Manifest) { m.Keys[1].CreatedAt = "yesterday" })},
		{name: "createdAt date only", reason: keyring.ReasonInvalidField, detail: "keys[1].createdAt",
			data: mutate(func(m *keyring.Manifest) { m.Keys[1].CreatedAt = "2026-08-01" })},
		{name: "material not base64", reason: keyring.ReasonInvalidField, detail: "keys[0].material",
			data: replace(b64, "!!"+b64[2:])},
		{name: "material unpadded", reason: keyring.ReasonInvalidField, detail: "keys[0].material",
			data: replace(b64, strings.TrimRight(b64, "="))},
		{name: "material short", reason: keyring.ReasonInvalidField, detail: "keys[0].material",
			data: mutate(func(m *keyring.Manifest) { m.Keys[0].Material = m.Keys[0].Material[:31] })},
		{name: "material long", reason: keyring.ReasonInvalidField, detail: "keys[0].material",
			data: mutate(func(m *keyring.Manifest) { m.Keys[0].Material = append(m.Keys[0].Material, 1) })},
		{name: "receipt digest uppercase", reason: keyring.ReasonInvalidField, detail: "retirements[0].materialDigest",
			data: mutate(func(m *keyring.Manifest) {
				m.Retirements[0].MaterialDigest = strings.ToUpper(m.Retirements[0].MaterialDigest)
			})},
		{name: "receipt digest other algorithm", reason: keyring.ReasonInvalidField, detail: "retirements[0].materialDigest",
			data: mutate(func(m *keyring.Manifest) {
				m.Retirements[0].MaterialDigest = strings.Replace(m.Retirements[0].MaterialDigest, "sha256:", "sha512:", 1)
			})},
		{name: "receipt request id empty", reason: keyring.ReasonInvalidField, detail: "retirements[0].requestId",
			data: mutate(func(m *keyring.Manifest) { m.Retirements[0].RequestID = "" })},
		{name: "receipt mutation id bad", reason: keyring.ReasonInvalidField, detail: "retirements[0].mutationId",
			data: mutate(func(m *keyring.Manifest) { m.Retirements[0].MutationID = "mut/1" })},
		{name: "receipt generation zero", reason: keyring.ReasonInvalidField, detail: "retirements[0].generation",
			data: mutate(func(m *keyring.Manifest) { m.Retirements[0].Generation = 0 })},
		{name: "receipt generation ahead of manifest", reason: keyring.ReasonInvalidField, detail: "retirements[0].generation",
			data: mutate(func(m *keyring.Manifest) { m.Retirements[0].Generation = 5 })},
		{name: "receipt generations not increasing", reason: keyring.ReasonInvalidField, detail: "retirements[1].generation",
			data: mutate(func(m *keyring.Manifest) {
				m.Retirements = append(m.Retirements, keyringtest.Receipt("k-2026-05", 4, "2026-07-16T00:00:00Z"))
			})},
		{name: "receipt retiredAt bad", reason: keyring.ReasonInvalidField, detail: "retirements[0].retiredAt",
			data: mutate(func(m *keyring.Manifest) { m.Retirements[0].RetiredAt = "2026-13-01T00:00:00Z" })},
		{name: "duplicate key id", reason: keyring.ReasonDuplicateKeyID, detail: "keys[1].id: k-2026-07",
			data: mutate(func(m *keyring.Manifest) { m.Keys[1].ID = "k-2026-07"; m.ActiveKeyID = "k-2026-07" })},
		{name: "unknown active key", reason: keyring.ReasonUnknownActiveKey, detail: "k-2026-09",
			data: mutate(func(m *keyring.Manifest) { m.ActiveKeyID = "k-2026-09" })},
		{name: "no keys", reason: keyring.ReasonUnknownActiveKey,
			data: mutate(func(m *keyring.Manifest) { m.Keys = nil })},
		{name: "retired key still present", reason: keyring.ReasonRetiredKeyPresent, detail: "retirements[0].keyId",
			data: mutate(func(m *keyring.Manifest) { m.Retirements[0].KeyID = "k-2026-07" })},
		{name: "duplicate retirement id", reason: keyring.ReasonDuplicateRetirementID, detail: "retirements[1].retirementId",
			data: mutate(func(m *keyring.Manifest) {
				r := keyringtest.Receipt("k-2026-05", 4, "2026-07-16T00:00:00Z")
				m.Retirements[0].Generation = 3
				r.RetirementID = m.Retirements[0].RetirementID
				m.Retirements = append(m.Retirements, r)
			})},
		{name: "key retired twice", reason: keyring.ReasonDuplicateRetiredKey, detail: "retirements[1].keyId",
			data: mutate(func(m *keyring.Manifest) {
				r := keyringtest.Receipt("k-2026-06", 4, "2026-07-16T00:00:00Z")
				m.Retirements[0].Generation = 3
				r.RetirementID = "ret-again"
				m.Retirements = append(m.Retirements, r)
			})},
	}
}

func TestParseRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range parseCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data := tc.data()
			m, err := keyring.Parse(data)
			require.Nil(t, m)
			kerr := requireReason(t, err, tc.reason)
			require.Contains(t, kerr.Detail, tc.detail)
			keyringtest.AssertNoMaterial(t, err.Error(), allMaterial()...)
			keyringtest.AssertNoMaterial(t, fmt.Sprintf("%v %+v %#v", err, err, err), allMaterial()...)
		})
	}
}

func TestParseAcceptsExactLimits(t *testing.T) {
	t.Parallel()
	m := standard()
	m.Generation = 100
	for i := range keyring.MaxKeys - len(m.Keys) {
		m.Keys = append(m.Keys, key(fmt.Sprintf("k-x-%02d", i)))
	}
	for i := range keyring.MaxRetirements - len(m.Retirements) {
		m.Retirements = append(m.Retirements, keyringtest.Receipt(fmt.Sprintf("old-%02d", i), int64(5+i), "2026-07-15T12:30:00Z"))
	}
	m.Canonicalize()
	data := m.Encode()
	got, err := keyring.Parse(data)
	require.NoError(t, err)
	require.Equal(t, data, got.Encode())
}

type retireCase struct {
	name   string
	setup  func(m *keyring.Manifest, p *keyring.RetireParams)
	reason string
	detail string
}

func retireParams() keyring.RetireParams {
	return keyring.RetireParams{
		KeyID:                  "k-2026-07",
		ExpectedMaterialDigest: keyring.MaterialDigest(keyringtest.Material("k-2026-07")),
		RetirementID:           "ret-7",
		RequestID:              "req-7",
		MutationID:             "mut-7",
		RetiredAt:              time.Date(2026, 8, 15, 14, 30, 0, 999, time.FixedZone("CEST", 2*3600)),
	}
}

func retireCases() []retireCase {
	return []retireCase{
		{name: "invalid manifest", reason: keyring.ReasonUnknownActiveKey,
			setup: func(m *keyring.Manifest, _ *keyring.RetireParams) { m.ActiveKeyID = "nope" }},
		{name: "bad key id", reason: keyring.ReasonInvalidField, detail: "params.keyId",
			setup: func(_ *keyring.Manifest, p *keyring.RetireParams) { p.KeyID = "" }},
		{name: "bad retirement id", reason: keyring.ReasonInvalidField, detail: "params.retirementId",
			setup: func(_ *keyring.Manifest, p *keyring.RetireParams) { p.RetirementID = "a b" }},
		{name: "bad request id", reason: keyring.ReasonInvalidField, detail: "params.requestId",
			setup: func(_ *keyring.Manifest, p *keyring.RetireParams) { p.RequestID = "" }},
		{name: "bad mutation id", reason: keyring.ReasonInvalidField, detail: "params.mutationId",
			setup: func(_ *keyring.Manifest, p *keyring.RetireParams) { p.MutationID = strings.Repeat("m", 129) }},
		{name: "bad expected digest", reason: keyring.ReasonInvalidField, detail: "params.expectedMaterialDigest",
			setup: func(_ *keyring.Manifest, p *keyring.RetireParams) { p.ExpectedMaterialDigest = "sha256:abc" }},
		{name: "zero retiredAt", reason: keyring.ReasonInvalidField, detail: "params.retiredAt",
			setup: func(_ *keyring.Manifest, p *keyring.RetireParams) { p.RetiredAt = time.Time{} }},
		{name: "retiredAt past year 9999", reason: keyring.ReasonInvalidField, detail: "params.retiredAt",
			setup: func(_ *keyring.Manifest, p *keyring.RetireParams) {
				p.RetiredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
			}},
		{name: "key absent", reason: keyring.ReasonKeyAbsent, detail: "k-2026-01",
			setup: func(_ *keyring.Manifest, p *keyring.RetireParams) { p.KeyID = "k-2026-01" }},
		{name: "key already retired", reason: keyring.ReasonKeyAbsent, detail: "k-2026-06",
			setup: func(_ *keyring.Manifest, p *keyring.RetireParams) {
				p.KeyID = "k-2026-06"
				p.ExpectedMaterialDigest = keyring.MaterialDigest(keyringtest.Material("k-2026-06"))
			}},
		{name: "key active", reason: keyring.ReasonKeyActive, detail: "k-2026-08",
			setup: func(_ *keyring.Manifest, p *keyring.RetireParams) {
				p.KeyID = "k-2026-08"
				p.ExpectedMaterialDigest = keyring.MaterialDigest(keyringtest.Material("k-2026-08"))
			}},
		{name: "material digest mismatch", reason: keyring.ReasonMaterialDigestMismatch, detail: "k-2026-07",
			setup: func(_ *keyring.Manifest, p *keyring.RetireParams) {
				p.ExpectedMaterialDigest = keyring.MaterialDigest(keyringtest.Material("other"))
			}},
		{name: "duplicate retirement id", reason: keyring.ReasonDuplicateRetirementID, detail: "ret-k-2026-06",
			setup: func(_ *keyring.Manifest, p *keyring.RetireParams) { p.RetirementID = "ret-k-2026-06" }},
		{name: "too many retirements", reason: keyring.ReasonTooManyRetirements,
			setup: func(m *keyring.Manifest, _ *keyring.RetireParams) {
				m.Generation = 100
				for i := range keyring.MaxRetirements - len(m.Retirements) {
					m.Retirements = append(m.Retirements, keyringtest.Receipt(fmt.Sprintf("old-%02d", i), int64(5+i), "2026-07-15T12:30:00Z"))
				}
			}},
		{name: "generation overflow", reason: keyring.ReasonGenerationOverflow,
			setup: func(m *keyring.Manifest, _ *keyring.RetireParams) { m.Generation = math.MaxInt64 }},
	}
}

func TestRetireRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range retireCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := standard()
			p := retireParams()
			tc.setup(m, &p)
			before := m.Encode()
			next, err := m.Retire(p)
			require.Nil(t, next)
			kerr := requireReason(t, err, tc.reason)
			require.Contains(t, kerr.Detail, tc.detail)
			require.Equal(t, before, m.Encode(), "input changed")
			keyringtest.AssertNoMaterial(t, fmt.Sprintf("%v %+v %#v", err, err, err), allMaterial()...)
		})
	}
}

func TestRetire(t *testing.T) {
	t.Parallel()
	m := standard()
	before := m.Encode()
	retired := append([]byte(nil), m.Keys[0].Material...)

	next, err := m.Retire(retireParams())
	require.NoError(t, err)

	// The input is untouched.
	require.Equal(t, before, m.Encode())
	require.Equal(t, retired, []byte(m.Keys[0].Material))

	require.Equal(t, int64(5), next.Generation)
	require.Equal(t, "k-2026-08", next.ActiveKeyID)
	require.Len(t, next.Keys, 1)
	require.Equal(t, "k-2026-08", next.Keys[0].ID)
	require.Len(t, next.Retirements, 2)
	require.Equal(t, standard().Retirements[0], next.Retirements[0])

	receipt, ok := next.Receipt("k-2026-07")
	require.True(t, ok)
	require.Equal(t, keyring.Retirement{
		KeyID:          "k-2026-07",
		RetirementID:   "ret-7",
		RequestID:      "req-7",
		MutationID:     "mut-7",
		MaterialDigest: keyring.MaterialDigest(keyringtest.Material("k-2026-07")),
		Generation:     5,
		RetiredAt:      "2026-08-15T12:30:00Z",
	}, receipt)
	_, ok = next.Receipt("k-2026-08")
	require.False(t, ok)

	// The result is canonical, parses, and holds the retired material in no form.
	data := next.Encode()
	parsed, err := keyring.Parse(data)
	require.NoError(t, err)
	require.Equal(t, next, parsed)
	keyringtest.AssertNoMaterial(t, string(data), retired)
	keyringtest.AssertNoMaterial(t, string(next.Catalog()), allMaterial()...)

	// The result shares no memory with the input.
	next.Keys[0].Material.Wipe()
	next.Retirements[0].KeyID = "changed"
	require.Equal(t, before, m.Encode())

	// Retiring again is refused; the receipt is how a caller learns it happened.
	_, err = next.Retire(retireParams())
	requireReason(t, err, keyring.ReasonKeyAbsent)
}

func TestRetireChain(t *testing.T) {
	t.Parallel()
	m := keyringtest.New(
		keyringtest.WithGeneration(0),
		keyringtest.WithKey("a", "2026-01-01T00:00:00Z", keyringtest.Material("a")),
		keyringtest.WithKey("b", "2026-01-01T00:00:00Z", keyringtest.Material("b")),
		keyringtest.WithKey("c", "2026-01-01T00:00:00Z", keyringtest.Material("c")),
		keyringtest.WithActive("c"),
	)
	for i, id := range []string{"b", "a"} {
		next, err := m.Retire(keyring.RetireParams{
			KeyID:                  id,
			ExpectedMaterialDigest: keyring.MaterialDigest(keyringtest.Material(id)),
			RetirementID:           "ret-" + id, RequestID: "req", MutationID: "mut-" + id,
			RetiredAt: time.Date(2026, 2, 1, 0, 0, i, 0, time.UTC),
		})
		require.NoError(t, err)
		m = next
	}
	require.Equal(t, int64(2), m.Generation)
	require.Equal(t, []int64{1, 2}, []int64{m.Retirements[0].Generation, m.Retirements[1].Generation})
	_, err := keyring.Parse(m.Encode())
	require.NoError(t, err)
}

func TestNothingPrintsMaterial(t *testing.T) {
	t.Parallel()
	m := standard()
	k := m.Keys[0]
	mat := k.Material

	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	logger.Info("manifest", "manifest", m, "key", k, "material", mat)
	textLogger := slog.New(slog.NewTextHandler(&logs, nil))
	textLogger.Info("manifest", "manifest", m, "key", k, "material", mat)

	jsonManifest, err := json.Marshal(m)
	require.NoError(t, err)
	jsonKey, err := json.Marshal(k)
	require.NoError(t, err)

	outputs := map[string]string{
		"manifest pointer": fmt.Sprintf("%v %+v %#v", m, m, m),
		"manifest value":   fmt.Sprintf("%v %+v %#v", *m, *m, *m),
		"keys":             fmt.Sprintf("%v %+v %#v %s %x %q", m.Keys, m.Keys, m.Keys, m.Keys, m.Keys, m.Keys),
		"key":              fmt.Sprintf("%v %+v %#v %s %x %X %q", k, k, k, k, k, k, k),
		"material":         fmt.Sprintf("%v %+v %#v %s %x %X %q %d %08b", mat, mat, mat, mat, mat, mat, mat, mat, mat),
		"print":            fmt.Sprint(m, k, mat) + fmt.Sprintln(m, k, mat),
		"json manifest":    string(jsonManifest),
		"json key":         string(jsonKey),
		"slog":             logs.String(),
		"string":           mat.String() + mat.GoString(),
	}
	for name, out := range outputs {
		keyringtest.AssertNoMaterial(t, out, allMaterial()...)
		require.Contains(t, out, "[redacted]", name)
	}
}

// TestEveryReasonIsTested keeps the tables honest: each reason has a case.
func TestEveryReasonIsTested(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{}
	for _, tc := range parseCases() {
		covered[tc.reason] = true
	}
	for _, tc := range retireCases() {
		covered[tc.reason] = true
	}
	for _, reason := range keyring.Reasons() {
		require.True(t, covered[reason], "no test case for reason %q", reason)
		require.Regexp(t, `^[a-z]+(-[a-z]+)*$`, reason)
	}
}

func TestErrorIs(t *testing.T) {
	t.Parallel()
	err := error(&keyring.Error{Reason: keyring.ReasonKeyActive, Detail: "k-1"})
	wrapped := fmt.Errorf("retiring: %w", err)
	require.ErrorIs(t, wrapped, &keyring.Error{Reason: keyring.ReasonKeyActive})
	require.ErrorIs(t, wrapped, &keyring.Error{Reason: keyring.ReasonKeyActive, Detail: "k-1"})
	require.False(t, errors.Is(wrapped, &keyring.Error{Reason: keyring.ReasonKeyAbsent}))
	require.False(t, errors.Is(wrapped, &keyring.Error{Reason: keyring.ReasonKeyActive, Detail: "k-2"}))
	require.Equal(t, "keyring: key-active: k-1", err.Error())
}

// TestFuzzSeeds pins what the committed seed corpus means: seeds named
// valid-* are accepted, the other named seeds refused. Seeds the fuzzer adds
// (hash names) are only run by FuzzParse.
func TestFuzzSeeds(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	named := 0
	for _, e := range entries {
		if !strings.Contains(e.Name(), "-") {
			continue
		}
		named++
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		header, literal, ok := strings.Cut(strings.TrimSpace(string(raw)), "\n")
		require.True(t, ok)
		require.Equal(t, "go test fuzz v1", header)
		literal, ok = strings.CutPrefix(literal, "[]byte(")
		require.True(t, ok, e.Name())
		data, err := strconv.Unquote(strings.TrimSuffix(literal, ")"))
		require.NoError(t, err, e.Name())
		_, err = keyring.Parse([]byte(data))
		if strings.HasPrefix(e.Name(), "valid-") {
			require.NoError(t, err, e.Name())
		} else {
			require.Error(t, err, e.Name())
		}
	}
	require.GreaterOrEqual(t, named, 6)
}

func FuzzParse(f *testing.F) {
	f.Add(standard().Encode())
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := keyring.Parse(data)
		if err != nil {
			var kerr *keyring.Error
			if !errors.As(err, &kerr) || kerr.Reason == "" {
				t.Fatalf("Parse returned a non-keyring error: %v", err)
			}
			require.Nil(t, m)
			return
		}
		if got := m.Encode(); !bytes.Equal(got, data) {
			t.Fatalf("accepted input does not re-encode identically:\n in: %q\nout: %q", data, got)
		}
		require.NoError(t, m.Validate())
		catalog := string(m.Catalog())
		for _, k := range m.Keys {
			if strings.Contains(catalog, base64.StdEncoding.EncodeToString(k.Material)) {
				t.Fatalf("catalog contains material of key %s", k.ID)
			}
			if strings.Contains(fmt.Sprintf("%v %+v %#v", m, m, m), base64.StdEncoding.EncodeToString(k.Material)) {
				t.Fatalf("formatting contains material of key %s", k.ID)
			}
		}
		again, err := keyring.Parse(m.Encode())
		require.NoError(t, err)
		require.Equal(t, m, again)
	})
}

// FuzzValidEncodesParse checks the promise of Validate: a manifest it accepts
// encodes to bytes that Parse accepts and decodes to the same manifest.
func FuzzValidEncodesParse(f *testing.F) {
	f.Add("k-2026-07", "2026-07-01T00:00:00Z", "ret-1", "2026-07-15T12:30:00Z", int64(4), int64(4), []byte("k"))
	f.Add("<a>", "2026-07-01T00:00:00.5Z", "r\u2028", "2026-07-15T12:30:00+02:00", int64(0), int64(-1), []byte{})
	f.Fuzz(func(t *testing.T, keyID, createdAt, retirementID, retiredAt string, gen, receiptGen int64, seed []byte) {
		m := keyringtest.New(
			keyringtest.WithGeneration(gen),
			keyringtest.WithKey(keyID, createdAt, keyringtest.Material(string(seed))),
			keyringtest.WithKey("zz-active", "2026-01-01T00:00:00Z", keyringtest.Material("zz")),
			keyringtest.WithActive("zz-active"),
			keyringtest.WithRetirement(keyring.Retirement{
				KeyID: "gone", RetirementID: retirementID, RequestID: "req", MutationID: "mut",
				MaterialDigest: keyring.MaterialDigest(seed), Generation: receiptGen, RetiredAt: retiredAt,
			}),
		)
		if err := m.Validate(); err != nil {
			return
		}
		parsed, err := keyring.Parse(m.Encode())
		require.NoError(t, err)
		require.Equal(t, m, parsed)
	})
}
