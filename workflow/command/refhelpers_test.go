package command

// The helpers of the decoders DecodeStrict replaced: generic over any Go
// type (embedded structs, ",string", TextUnmarshaler and integer map keys,
// arrays), and the hand-written string literal check. The test-only
// copies of those decoders (olddecode_test.go, walker_test.go) use them,
// while DecodeStrict decodes only the kinds command types use (fields.go).

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

var quotedFieldCache sync.Map // reflect.Type -> map[string]bool

// quotedFields maps the member names of struct type t to whether each is
// quoted: the first of t's visible fields whose json tag name, or Go name
// when the tag names none, is the member's decides, quoted when it is
// tagged ",string" and of a type the option applies to. It is computed
// once per type: a document holds a string value for each of many
// members of the same few types.
func quotedFields(t reflect.Type) map[string]bool {
	if q, ok := quotedFieldCache.Load(t); ok {
		return q.(map[string]bool)
	}
	quoted := map[string]bool{}
	for _, f := range reflect.VisibleFields(t) {
		tagName, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		var q bool
		switch f.Type.Kind() {
		case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr, reflect.Float32, reflect.Float64:
			q = slices.Contains(strings.Split(opts, ","), "string")
		}
		// A field answers for its tag name, and for its Go name when the
		// tag names none (then also for the empty member name, which
		// equals the empty tag name).
		names := []string{tagName}
		if tagName == "" {
			names = append(names, f.Name)
		}
		for _, name := range names {
			if _, decided := quoted[name]; !decided {
				quoted[name] = q
			}
		}
	}
	q, _ := quotedFieldCache.LoadOrStore(t, quoted)
	return q.(map[string]bool)
}

var refJSONFieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// refJSONFields maps the member names encoding/json decodes into struct type
// t to their types: a field's json tag name or its Go name; a promoted
// field of an embedded struct at the shallowest depth, a tagged one winning
// a tie; ambiguous names are left out.
func refJSONFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := refJSONFieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	type candidate struct {
		typ    reflect.Type
		depth  int
		tagged bool
		count  int
	}
	best := map[string]candidate{}
	for _, f := range reflect.VisibleFields(t) {
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && (name == "" && ft.Kind() == reflect.Struct || !f.IsExported()) {
			continue // its fields are promoted, and listed on their own
		}
		c := candidate{typ: f.Type, depth: len(f.Index), tagged: name != "", count: 1}
		if name == "" {
			name = f.Name
		}
		switch old, ok := best[name]; {
		case !ok || c.depth < old.depth:
			best[name] = c
		case c.depth == old.depth && c.tagged && !old.tagged:
			best[name] = c
		case c.depth == old.depth && c.tagged == old.tagged:
			old.count++
			best[name] = old
		}
	}
	fields := make(map[string]reflect.Type, len(best))
	for name, c := range best {
		if c.count == 1 {
			fields[name] = c.typ
		}
	}
	refJSONFieldCache.Store(t, fields)
	return fields
}

// refCheckNumber returns "" when s fits t, a problem when it does not, and
// "wrong-type" when t takes no number at all.
func refCheckNumber(s string, t reflect.Type) string {
	var err error
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		_, err = strconv.ParseInt(s, 10, t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		_, err = strconv.ParseUint(s, 10, t.Bits())
	case reflect.Float32, reflect.Float64:
		_, err = strconv.ParseFloat(s, t.Bits())
	case reflect.String:
		if t != numberType {
			return "wrong-type"
		}
	case reflect.Interface:
		if t.NumMethod() != 0 {
			return "wrong-type"
		}
		_, err = strconv.ParseFloat(s, 64) // encoding/json stores a float64
	default:
		return "wrong-type"
	}
	switch {
	case err == nil:
		return ""
	case errors.Is(err, strconv.ErrRange) && t.Kind() == reflect.Interface:
		return "number out of range"
	case errors.Is(err, strconv.ErrRange):
		return "number out of range for " + t.Kind().String()
	default:
		return "want " + refWantKind(t) + ", got number"
	}
}

// refWantKind names the JSON type that t takes, or "" if it takes none.
func refWantKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		if t == numberType {
			return "number"
		}
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return ""
}

// refCheckLiteral is checkLiteral as it was, by hand: it checks the raw bytes of a JSON string literal, quotes
// included, for invalid UTF-8 and unpaired surrogate escapes.
func refCheckLiteral(lit []byte) string {
	if !utf8.Valid(lit) {
		return "invalid UTF-8"
	}
	end := len(lit) - 1 // closing quote
	for i := 1; i < end; i++ {
		if lit[i] != '\\' {
			continue
		}
		i++
		if i+4 >= end || lit[i] != 'u' {
			continue
		}
		r := refHex4(lit[i+1 : i+5])
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return "unpaired UTF-16 surrogate escape"
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 < end && lit[i+1] == '\\' && lit[i+2] == 'u' {
				if r2 := refHex4(lit[i+3 : i+7]); r2 >= 0xDC00 && r2 <= 0xDFFF {
					i += 6
					continue
				}
			}
			return "unpaired UTF-16 surrogate escape"
		}
	}
	return ""
}

// refHex4 is the value of four hex digits (the decoder has checked them).
func refHex4(b []byte) uint64 {
	r, _ := strconv.ParseUint(string(b), 16, 16)
	return r
}
