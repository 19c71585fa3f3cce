package command

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

var (
	typeCache  sync.Map // reflect.Type -> error (nil: supported)
	fieldCache sync.Map // reflect.Type -> map[string]reflect.Type
)

// supported returns nil when DecodeStrict can decode into t, and else a
// programming error (no refusal): it decodes the kinds command types use
// (strings, booleans, numbers, structs, pointers, slices, maps with string
// keys, json.RawMessage and empty interfaces) and no other, so that its
// walk decides exactly as encoding/json does. It is checked once per type.
func supported(t reflect.Type) error {
	if err, ok := typeCache.Load(t); ok {
		err, _ := err.(error)
		return err
	}
	err := unsupported(t, map[reflect.Type]bool{})
	if err != nil {
		err = fmt.Errorf("command: DecodeStrict cannot decode into %s: %w", t, err)
	}
	typeCache.Store(t, err)
	return err
}

// unsupported is the error for the first type in t DecodeStrict does not
// decode into; it notes the fields of each struct type on the way.
func unsupported(t reflect.Type, seen map[reflect.Type]bool) error {
	if seen[t] || t == rawType {
		return nil
	}
	seen[t] = true
	switch k := t.Kind(); {
	case t == numberType, reflect.PointerTo(t).Implements(jsonUnmarshalerType), reflect.PointerTo(t).Implements(textType):
	case k == reflect.Bool, k == reflect.String, isNumber(t), k == reflect.Interface && t.NumMethod() == 0:
		return nil
	case k == reflect.Pointer, k == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		return unsupported(t.Elem(), seen)
	case k == reflect.Map && t.Key().Kind() == reflect.String:
		return errors.Join(unsupported(t.Key(), seen), unsupported(t.Elem(), seen))
	case k == reflect.Struct:
		return structFields(t, seen)
	}
	return fmt.Errorf("%s is no kind command types use", t)
}

// structFields checks the fields of struct type t, each exported, not
// embedded, and tagged with a member name of its own (and at most
// "omitempty"), and notes them for fields.
func structFields(t reflect.Type, seen map[reflect.Type]bool) error {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		_, twice := fields[name]
		if f.Anonymous || !f.IsExported() || name == "" || name == "-" || twice || opts != "" && opts != "omitempty" {
			return fmt.Errorf(`%s.%s: want a field tagged json:"name" or json:"name,omitempty"`, t, f.Name)
		}
		if err := unsupported(f.Type, seen); err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		fields[name] = f.Type
	}
	fieldCache.Store(t, fields)
	return nil
}

// fields maps the member names of struct type t, which supported has
// accepted, to the types of their fields.
func fields(t reflect.Type) map[string]reflect.Type {
	f, _ := fieldCache.Load(t)
	return f.(map[string]reflect.Type)
}

// member is the type of the member name of a value of type t, or of its
// elements (name ""): nil for a struct without that member.
func member(t reflect.Type, name string) reflect.Type {
	switch t.Kind() {
	case reflect.Struct:
		return fields(t)[name]
	case reflect.Map, reflect.Slice:
		return t.Elem()
	}
	return anyType
}

// fits says why tok, the first token of a value, does not fit t (a
// pointer only when tok is null), or "". An interface takes any value
// whose numbers fit a float64.
func fits(tok json.Token, t reflect.Type) string {
	k := t.Kind()
	isAny := k == reflect.Interface
	switch tok := tok.(type) {
	case nil:
		if isAny || k == reflect.Pointer {
			return ""
		}
	case json.Delim:
		if isAny || tok == '{' && (k == reflect.Struct || k == reflect.Map) || tok == '[' && k == reflect.Slice {
			return ""
		}
	case string:
		if isAny || k == reflect.String {
			return ""
		}
	case bool:
		if isAny || k == reflect.Bool {
			return ""
		}
	case json.Number:
		if isAny || isNumber(t) {
			return numberProblem(string(tok), t)
		}
	}
	return "want " + wantKind(t) + ", got " + tokenKind(tok)
}

func isNumber(t reflect.Type) bool {
	k := t.Kind()
	return reflect.Int <= k && k <= reflect.Uint64 || k == reflect.Float32 || k == reflect.Float64
}

// numberProblem says why the number s does not fit t, a number type or an
// empty interface (which encoding/json gives a float64), or "".
func numberProblem(s string, t reflect.Type) string {
	var err error
	switch k := t.Kind(); {
	case k <= reflect.Int64:
		_, err = strconv.ParseInt(s, 10, t.Bits())
	case k <= reflect.Uint64:
		_, err = strconv.ParseUint(s, 10, t.Bits())
	case k == reflect.Interface:
		_, err = strconv.ParseFloat(s, 64)
	default:
		_, err = strconv.ParseFloat(s, t.Bits())
	}
	switch {
	case err == nil:
		return ""
	case !errors.Is(err, strconv.ErrRange):
		return "want " + wantKind(t) + ", got number"
	case t.Kind() == reflect.Interface:
		return "number out of range"
	}
	return "number out of range for " + t.Kind().String()
}

// wantKind names the JSON type that t, a supported type but no pointer or
// interface, takes.
func wantKind(t reflect.Type) string {
	switch k := t.Kind(); {
	case k == reflect.Struct, k == reflect.Map:
		return "object"
	case k == reflect.Slice:
		return "array"
	case k == reflect.String:
		return "string"
	case k == reflect.Bool:
		return "boolean"
	case k <= reflect.Int64:
		return "integer"
	case k <= reflect.Uint64:
		return "non-negative integer"
	}
	return "number"
}

func tokenKind(tok json.Token) string {
	switch tok.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	}
	if tok == json.Delim('[') {
		return "array"
	}
	return "object"
}

var (
	rawType             = reflect.TypeFor[json.RawMessage]()
	numberType          = reflect.TypeFor[json.Number]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType            = reflect.TypeFor[encoding.TextUnmarshaler]()
	anyType             = reflect.TypeFor[any]()
)
