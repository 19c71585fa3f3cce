package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
)

// Detail is a record's content-free facts as the journal holds them: one
// JSON object (the jsonb column detail). A family writes it from a typed
// value (DetailOf, one struct per record kind, whose JSON tags are the
// journal's schema) and reads it back into one (DecodeDetail); nothing
// reads a detail by key. It is held in canonical form (the encoding/json
// form of the object read back as generic JSON: keys sorted, numbers as
// float64, as a detail has always read back), so a detail encoded from a typed value and the same detail
// read back from PostgreSQL are equal, byte for byte and with ==. The zero
// Detail is the empty object.
type Detail struct{ raw string }

// DetailOf encodes v (a struct of content-free facts, or nil for none) as a
// record detail. It panics when v does not encode to a JSON object: the
// types passed are the families' own record types, so that is a
// programming error, never an input's.
func DetailOf(v any) Detail {
	d, err := NewDetail(v)
	if err != nil {
		panic(fmt.Sprintf("store.DetailOf(%T): %v", v, err))
	}
	return d
}

// NewDetail encodes v as a record detail; an error when v does not encode
// to a JSON object (or null, the empty detail).
func NewDetail(v any) (Detail, error) {
	if d, ok := v.(Detail); ok {
		return d, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return Detail{}, fmt.Errorf("encoding detail: %w", err)
	}
	return ParseDetail(raw)
}

// ParseDetail reads a detail as the journal stores it (a JSON object, or
// null for none) into canonical form.
func ParseDetail(raw []byte) (Detail, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var v any
	if err := dec.Decode(&v); err != nil {
		return Detail{}, fmt.Errorf("decoding detail: %w", err)
	}
	if dec.More() {
		return Detail{}, errors.New("decoding detail: more than one JSON value")
	}
	if v == nil {
		return Detail{}, nil
	}
	if _, ok := v.(map[string]any); !ok {
		return Detail{}, fmt.Errorf("decoding detail: a detail is a JSON object, not %T", v)
	}
	canonical, err := json.Marshal(v)
	if err != nil {
		return Detail{}, fmt.Errorf("encoding detail: %w", err)
	}
	if string(canonical) == "{}" {
		return Detail{}, nil
	}
	return Detail{raw: string(canonical)}, nil
}

// DecodeDetail reads d into a value of the record type T. Fields T does
// not declare are ignored (a newer journal may say more).
func DecodeDetail[T any](d Detail) (T, error) {
	var v T
	if err := json.Unmarshal(d.JSON(), &v); err != nil {
		return v, fmt.Errorf("decoding %T detail: %w", v, err)
	}
	return v, nil
}

// Merge is the object with the fields of every detail in ds, a later
// detail's field replacing an earlier one's: how the engine adds its own
// typed facts (an answer's code, a kept resolution, a batch's targets) to
// the detail a family gave.
func Merge(ds ...Detail) Detail {
	out := map[string]json.RawMessage{}
	for _, d := range ds {
		if d.IsZero() {
			continue
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(d.raw), &fields); err != nil {
			panic(fmt.Sprintf("store.Merge: a canonical detail does not decode: %v", err)) // unreachable: raw is canonical
		}
		maps.Copy(out, fields)
	}
	return DetailOf(out)
}

// IsZero reports whether d is the empty object.
func (d Detail) IsZero() bool { return d.raw == "" }

// JSON is d's canonical JSON text ({} when empty).
func (d Detail) JSON() []byte {
	if d.raw == "" {
		return []byte("{}")
	}
	return []byte(d.raw)
}

// String is d's canonical JSON text.
func (d Detail) String() string { return string(d.JSON()) }

// MarshalJSON encodes d as its JSON object.
func (d Detail) MarshalJSON() ([]byte, error) { return d.JSON(), nil }

// UnmarshalJSON reads a JSON object (or null) into d.
func (d *Detail) UnmarshalJSON(raw []byte) error {
	parsed, err := ParseDetail(raw)
	if err != nil {
		return err
	}
	*d = parsed
	return nil
}

// RunLineage is what PrepareRun adds to the preparation detail of a run
// that follows a run it closed or one of a different command digest.
type RunLineage struct {
	Supersedes      string `json:"supersedes,omitempty"`
	Replaces        string `json:"replaces,omitempty"`
	ReplacedBecause string `json:"replacedBecause,omitempty"`
}

// RunNumber is what PrepareRun adds to the preparation detail of every run
// of a desired-state command: the command (its mutation ID) and the run's
// number.
type RunNumber struct {
	Command string `json:"command"`
	Run     int64  `json:"run"`
}

// ResumeDetail is the detail of a resume-run observation: the how-many-th
// resume of the run it is.
type ResumeDetail struct {
	Resume int `json:"resume"`
}

// CloseRunDetail is the detail of a close-run refusal.
type CloseRunDetail struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
}
