package command

import (
	"encoding/json"
	"fmt"
	"reflect"

	sigsjson "sigs.k8s.io/json"
)

// DecodeStrict decodes data, a JSON object, into v, a non-nil pointer, and
// refuses anything encoding/json would accept silently or lossily:
//
//   - data larger than MaxSize;
//   - a top-level value that is not an object, or data after it other than
//     white space;
//   - a member name that matches no field (names match json tags exactly,
//     not case-insensitively);
//   - a member name repeated in one object, at any depth, including inside
//     json.RawMessage and interface values;
//   - a value of the wrong JSON type, or a number that does not fit the field
//     (in a json.RawMessage or interface value: a float64);
//   - null, except where the field is a pointer or an interface: a field
//     that may be absent is a pointer, and null means absent;
//   - invalid UTF-8 and unpaired UTF-16 surrogate escapes, which
//     encoding/json would replace with U+FFFD;
//   - nesting deeper than 32.
//
// v holds the kinds command types use (see supported); any other type is
// a programming error, returned as a plain error. One scan reads the
// tokens and checks each as it comes, along v's type (see scanner);
// Kubernetes' strict decoding (sigs.k8s.io/json, as for kubectl's
// manifests) then has the last word on fields and types. When a document
// has several problems the first in the document is reported. The value
// stored in v is encoding/json's (numbers in interface values are
// float64), so digests are unchanged.
//
// Every refusal is an *InvalidError whose Field is the JSON path of the
// offending member; no message contains a value from data.
func DecodeStrict(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("command: DecodeStrict needs a non-nil pointer, got %T", v)
	}
	if err := supported(rv.Type().Elem()); err != nil {
		return err
	}
	if len(data) > MaxSize {
		return Invalid("", fmt.Sprintf("larger than %d bytes", MaxSize))
	}
	if p := scan(data, rv.Type().Elem(), false).first; p != nil {
		line, column := lineColumn(data, p.at)
		return &LocatedError{InvalidError: p.err, Line: line, Column: column, Suggestion: p.suggest}
	}
	strict, err := sigsjson.UnmarshalStrict(data, reflect.New(rv.Type().Elem()).Interface(),
		sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil || len(strict) > 0 || json.Unmarshal(data, v) != nil {
		// The scan accepts only what these accept; this is a backstop, and
		// their messages may quote the value, so they are not passed on.
		return Invalid("", "invalid value")
	}
	return nil
}
