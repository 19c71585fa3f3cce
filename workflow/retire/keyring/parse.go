package keyring

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Parse reads a manifest: it refuses input over MaxManifestBytes, decodes it
// strictly (no duplicate or unknown members, no missing members, no trailing
// data), validates it (see [Manifest.Validate]) and finally refuses it unless
// it is byte-identical to its own canonical encoding. Every error is an
// [*Error]; none contains material.
func Parse(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestBytes {
		return nil, refuse(ReasonTooLarge, "%d bytes, at most %d", len(data), MaxManifestBytes)
	}
	if m := parseCanonical(data); m != nil {
		return m, nil
	}
	return parseStrict(data)
}

// parseStrict is Parse after the size check, without parseCanonical: a
// strict decode that names the first thing wrong.
func parseStrict(data []byte) (*Manifest, error) {
	m, err := decode(data)
	if err != nil {
		return nil, err
	}
	if err := m.validate(); err != nil {
		m.wipe()
		return nil, err
	}
	if !bytes.Equal(m.Encode(), data) {
		m.wipe()
		return nil, refuse(ReasonNonCanonical, "bytes differ from the canonical encoding")
	}
	return m, nil
}

// parseCanonical is Parse for the input it accepts, which is what a run
// reads nearly every time: it returns the manifest only when data is,
// byte for byte, the canonical encoding of a manifest that validates, and
// nil otherwise; Parse then decodes strictly, to name what is wrong. It
// accepts exactly what the strict path accepts, with the same manifest:
// the strict path ends with the same validation and the same comparison
// with the canonical encoding, and accepts every validated manifest's
// encoding (see [Manifest.Validate]); every leniency of encoding/json (a
// member's name in another case, a duplicate, an unknown or a missing
// member, whitespace, base64 with line breaks) changes the encoding of
// what it decodes, so the comparison refuses it. It is a tenth of the
// strict decoder's allocations (one json.Unmarshal instead of a token
// stream).
func parseCanonical(data []byte) *Manifest {
	var w struct {
		Schema      string `json:"schema"`
		Generation  int64  `json:"generation"`
		ActiveKeyID string `json:"activeKeyId"`
		Keys        []struct {
			ID        string `json:"id"`
			CreatedAt string `json:"createdAt"`
			Material  []byte `json:"material"`
		} `json:"keys"`
		Retirements []struct {
			KeyID          string `json:"keyId"`
			RetirementID   string `json:"retirementId"`
			RequestID      string `json:"requestId"`
			MutationID     string `json:"mutationId"`
			MaterialDigest string `json:"materialDigest"`
			Generation     int64  `json:"generation"`
			RetiredAt      string `json:"retiredAt"`
		} `json:"retirements"`
	}
	err := json.Unmarshal(data, &w)
	m := &Manifest{Schema: w.Schema, Generation: w.Generation, ActiveKeyID: w.ActiveKeyID,
		Keys: make([]Key, 0, len(w.Keys)), Retirements: make([]Retirement, 0, len(w.Retirements))}
	for _, k := range w.Keys {
		m.Keys = append(m.Keys, Key{ID: k.ID, CreatedAt: k.CreatedAt, Material: k.Material})
	}
	if err != nil || w.Keys == nil || w.Retirements == nil {
		m.wipe()
		return nil
	}
	for _, r := range w.Retirements {
		m.Retirements = append(m.Retirements, Retirement(r))
	}
	// The size rule holds: the encoding is data, which Parse measured.
	if m.validateMembers() != nil || !bytes.Equal(m.Encode(), data) {
		m.wipe()
		return nil
	}
	return m
}

// wipe zeroes all material held by m.
func (m *Manifest) wipe() {
	for _, k := range m.Keys {
		k.Material.Wipe()
	}
}

// decoder walks the JSON token stream of one manifest.
type decoder struct {
	dec *json.Decoder
}

func decode(data []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	d := &decoder{dec: dec}
	m := &Manifest{}
	if err := d.manifest(m); err != nil {
		m.wipe()
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		m.wipe()
		return nil, refuse(ReasonMalformed, "data after the manifest")
	}
	return m, nil
}

func (d *decoder) manifest(m *Manifest) *Error {
	return d.object("manifest", []string{"schema", "generation", "activeKeyId", "keys", "retirements"},
		func(name string) *Error {
			switch name {
			case "schema":
				return d.str("schema", &m.Schema)
			case "generation":
				return d.int("generation", &m.Generation)
			case "activeKeyId":
				return d.str("activeKeyId", &m.ActiveKeyID)
			case "keys":
				m.Keys = []Key{}
				return d.array("keys", func(i int) *Error {
					if i >= MaxKeys {
						return refuse(ReasonTooManyKeys, "more than %d keys", MaxKeys)
					}
					m.Keys = append(m.Keys, Key{})
					return d.key(fmt.Sprintf("keys[%d]", i), &m.Keys[i])
				})
			default: // "retirements"
				m.Retirements = []Retirement{}
				return d.array("retirements", func(i int) *Error {
					if i >= MaxRetirements {
						return refuse(ReasonTooManyRetirements, "more than %d retirements", MaxRetirements)
					}
					m.Retirements = append(m.Retirements, Retirement{})
					return d.retirement(fmt.Sprintf("retirements[%d]", i), &m.Retirements[i])
				})
			}
		})
}

func (d *decoder) key(field string, k *Key) *Error {
	return d.object(field, []string{"id", "createdAt", "material"}, func(name string) *Error {
		switch name {
		case "id":
			return d.str(field+".id", &k.ID)
		case "createdAt":
			return d.str(field+".createdAt", &k.CreatedAt)
		default: // "material"
			var s string
			if err := d.str(field+".material", &s); err != nil {
				return err
			}
			raw, err := base64.StdEncoding.Strict().DecodeString(s)
			if err != nil {
				clear(raw)
				return refuse(ReasonInvalidField, "%s.material: must be standard padded base64", field)
			}
			k.Material = raw
			return nil
		}
	})
}

func (d *decoder) retirement(field string, r *Retirement) *Error {
	names := []string{"keyId", "retirementId", "requestId", "mutationId", "materialDigest", "generation", "retiredAt"}
	return d.object(field, names, func(name string) *Error {
		f := field + "." + name
		switch name {
		case "keyId":
			return d.str(f, &r.KeyID)
		case "retirementId":
			return d.str(f, &r.RetirementID)
		case "requestId":
			return d.str(f, &r.RequestID)
		case "mutationId":
			return d.str(f, &r.MutationID)
		case "materialDigest":
			return d.str(f, &r.MaterialDigest)
		case "generation":
			return d.int(f, &r.Generation)
		default: // "retiredAt"
			return d.str(f, &r.RetiredAt)
		}
	})
}

// object reads one JSON object whose members must be exactly names (in any
// order; order is checked by the canonical comparison), calling member for
// each with the decoder positioned at the member's value.
func (d *decoder) object(field string, names []string, member func(name string) *Error) *Error {
	if err := d.delim(field, '{'); err != nil {
		return err
	}
	seen := make(map[string]bool, len(names))
	for d.dec.More() {
		tok, err := d.token(field)
		if err != nil {
			return err
		}
		name, _ := tok.(string) // object keys are always strings
		known := false
		for _, n := range names {
			known = known || n == name
		}
		if !known {
			return refuse(ReasonMalformed, "%s: unknown member %s", field, memberName(name))
		}
		if seen[name] {
			return refuse(ReasonMalformed, "%s: duplicate member %s", field, memberName(name))
		}
		seen[name] = true
		if err := member(name); err != nil {
			return err
		}
	}
	if err := d.delim(field, '}'); err != nil {
		return err
	}
	for _, n := range names {
		if !seen[n] {
			return refuse(ReasonMalformed, "%s: missing member %q", field, n)
		}
	}
	return nil
}

// array reads one JSON array, calling elem for each element.
func (d *decoder) array(field string, elem func(i int) *Error) *Error {
	if err := d.delim(field, '['); err != nil {
		return err
	}
	for i := 0; d.dec.More(); i++ {
		if err := elem(i); err != nil {
			return err
		}
	}
	return d.delim(field, ']')
}

func (d *decoder) str(field string, dst *string) *Error {
	tok, err := d.token(field)
	if err != nil {
		return err
	}
	s, ok := tok.(string)
	if !ok {
		return refuse(ReasonMalformed, "%s: must be a string", field)
	}
	*dst = s
	return nil
}

func (d *decoder) int(field string, dst *int64) *Error {
	tok, err := d.token(field)
	if err != nil {
		return err
	}
	n, ok := tok.(json.Number)
	if !ok {
		return refuse(ReasonMalformed, "%s: must be a number", field)
	}
	v, perr := strconv.ParseInt(string(n), 10, 64)
	if perr != nil {
		return refuse(ReasonInvalidField, "%s: must be an integer between 0 and %d", field, int64(1<<63-1))
	}
	*dst = v
	return nil
}

func (d *decoder) delim(field string, want json.Delim) *Error {
	tok, err := d.token(field)
	if err != nil {
		return err
	}
	if got, ok := tok.(json.Delim); !ok || got != want {
		if want == '{' || want == '[' {
			return refuse(ReasonMalformed, "%s: must be %s", field, map[json.Delim]string{'{': "an object", '[': "an array"}[want])
		}
		return refuse(ReasonMalformed, "%s: unexpected value", field)
	}
	return nil
}

// token reads the next token. Syntax errors are reported by offset only: the
// JSON library's messages quote input, which may be material.
func (d *decoder) token(field string) (json.Token, *Error) {
	tok, err := d.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, refuse(ReasonMalformed, "%s: unexpected end of input", field)
		}
		return nil, refuse(ReasonMalformed, "%s: invalid JSON near byte %d", field, d.dec.InputOffset())
	}
	return tok, nil
}

// memberName quotes an unknown member name only when it is short and plain,
// so a misplaced secret can never reach an error message.
func memberName(name string) string {
	if len(name) > 32 {
		return "(name withheld)"
	}
	for i := range len(name) {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return "(name withheld)"
		}
	}
	return strconv.Quote(name)
}
