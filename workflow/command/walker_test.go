package command

// The reflection walker that decoded command files before DecodeStrict was
// rebuilt on sigs.k8s.io/json, kept as a test-only copy: TestDecodersAgree
// feeds both the fuzz corpus and a table of hostile inputs and requires the
// same decision and the same field. It shares tokenKind and joinField with
// DecodeStrict; refCheckNumber, refWantKind and refCheckLiteral are
// refhelpers_test.go's.

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

var (
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	anyMapType          = reflect.TypeFor[map[string]any]()
)

// walkDecodeStrict is the reflection walker DecodeStrict replaced, kept
// only here: TestDecodersAgree requires the same decision from both. It decodes data, a JSON object, into v, a non-nil pointer, and
// refuses anything encoding/json would accept silently or lossily:
//
//   - a top-level value that is not an object, or data after it other than
//     white space;
//   - a member name that matches no field (names match json tags exactly,
//     not case-insensitively);
//   - a member name repeated in one object, at any depth, including inside
//     json.RawMessage and interface values;
//   - a value of the wrong JSON type, or a number that does not fit the field;
//   - null, except where the field is a pointer or an interface: a field
//     that may be absent is a pointer, and null means absent;
//   - invalid UTF-8 and unpaired UTF-16 surrogate escapes, which
//     encoding/json would replace with U+FFFD;
//   - nesting deeper than 32.
//
// Every refusal is an *InvalidError whose Field is the JSON path of the
// offending member; no message contains a value from data.
func walkDecodeStrict(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("command: DecodeStrict needs a non-nil pointer, got %T", v)
	}
	if err := check(data, rv.Type().Elem()); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		// check accepts only what encoding/json accepts; this is a backstop,
		// and its message may quote the value, so it is not passed on.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Invalid(te.Field, "invalid value")
		}
		return Invalid("", "invalid value")
	}
	return nil
}

// check walks the tokens of data against type t.
func check(data []byte, t reflect.Type) error {
	w := &walker{dec: json.NewDecoder(bytes.NewReader(data)), data: data}
	w.dec.UseNumber()
	tok, err := w.next("", false)
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return Invalid("", "want object, got "+tokenKind(tok))
	}
	if err := w.value(tok, t, ""); err != nil {
		return err
	}
	if _, err := w.dec.Token(); err != io.EOF {
		return Invalid("", "data after the top-level object")
	}
	if !utf8.Valid(data) {
		return Invalid("", "invalid UTF-8")
	}
	return nil
}

type walker struct {
	dec   *json.Decoder
	data  []byte
	start int64 // input offset before the last token
	depth int
}

// next reads one token. Strings are checked on their raw bytes, since the
// decoder has already replaced bad UTF-8 by the time it returns them.
func (w *walker) next(path string, key bool) (json.Token, error) {
	w.start = w.dec.InputOffset()
	tok, err := w.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, Invalid(path, "unexpected end of input")
		case errors.As(err, &se):
			return nil, Invalid(path, fmt.Sprintf("invalid JSON at byte offset %d", se.Offset))
		default:
			return nil, Invalid(path, "invalid JSON")
		}
	}
	if _, ok := tok.(string); ok {
		lit := w.data[w.start:w.dec.InputOffset()]
		if i := bytes.IndexByte(lit, '"'); i >= 0 {
			lit = lit[i:]
		}
		if problem := refCheckLiteral(lit); problem != "" {
			if key {
				problem += " in member name"
			}
			return nil, Invalid(path, problem)
		}
	}
	return tok, nil
}

// raw returns the bytes of the value that began at start and ends at the
// current offset.
func (w *walker) raw(start int64) []byte {
	return bytes.TrimLeft(w.data[start:w.dec.InputOffset()], " \t\r\n,:")
}

func (w *walker) enter(path string) error {
	w.depth++
	if w.depth > maxDepth {
		return Invalid(path, fmt.Sprintf("nested deeper than %d", maxDepth))
	}
	return nil
}

// value checks the value that begins with tok against t.
func (w *walker) value(tok json.Token, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		if tok == nil {
			return nil
		}
		t = t.Elem()
	}
	if t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
		start := w.start
		if err := w.value(tok, anyType, path); err != nil {
			return err
		}
		if t == rawMessageType {
			return nil
		}
		u := reflect.New(t).Interface().(json.Unmarshaler)
		if err := u.UnmarshalJSON(w.raw(start)); err != nil {
			return Invalid(path, "invalid value")
		}
		return nil
	}
	if tok == nil {
		if t.Kind() == reflect.Interface {
			return nil
		}
		return mismatch(path, t, tok)
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		s, ok := tok.(string)
		if !ok {
			return Invalid(path, "want string, got "+tokenKind(tok))
		}
		u := reflect.New(t).Interface().(encoding.TextUnmarshaler)
		if err := u.UnmarshalText([]byte(s)); err != nil {
			return Invalid(path, "invalid value")
		}
		return nil
	}
	empty := t.Kind() == reflect.Interface && t.NumMethod() == 0
	switch tok := tok.(type) {
	case json.Delim:
		switch {
		case tok == '{' && t.Kind() == reflect.Struct:
			return w.object(t, path)
		case tok == '{' && t.Kind() == reflect.Map:
			return w.mapObject(t, path)
		case tok == '{' && empty:
			return w.mapObject(anyMapType, path)
		case tok == '[' && t.Kind() == reflect.Slice:
			return w.array(t.Elem(), -1, path)
		case tok == '[' && t.Kind() == reflect.Array:
			return w.array(t.Elem(), t.Len(), path)
		case tok == '[' && empty:
			return w.array(anyType, -1, path)
		}
	case string:
		switch {
		case t.Kind() == reflect.String && t != numberType, empty:
			return nil
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
			if _, err := base64.StdEncoding.DecodeString(tok); err != nil {
				return Invalid(path, "want base64 string")
			}
			return nil
		}
	case json.Number:
		if problem := refCheckNumber(string(tok), t); problem != "wrong-type" {
			if problem != "" {
				return Invalid(path, problem)
			}
			return nil
		}
	case bool:
		if t.Kind() == reflect.Bool || empty {
			return nil
		}
	}
	return mismatch(path, t, tok)
}

func (w *walker) object(t reflect.Type, path string) error {
	fields := walkerStructFields(t)
	return w.members(path, func(name, fpath string, tok json.Token) error {
		f := fields[name]
		if f.quoted {
			return w.quoted(tok, f.typ, fpath)
		}
		return w.value(tok, f.typ, fpath)
	}, func(name, fpath string) error {
		if _, ok := fields[name]; !ok {
			return Invalid(fpath, "unknown field")
		}
		return nil
	})
}

func (w *walker) mapObject(t reflect.Type, path string) error {
	return w.members(path, func(_, fpath string, tok json.Token) error {
		return w.value(tok, t.Elem(), fpath)
	}, func(name, fpath string) error {
		return checkMapKey(name, t.Key(), fpath)
	})
}

// members walks the members of the object at path (its '{' already read):
// each name must be new (no duplicate member) and pass checkName before its
// value is read and handed to value.
func (w *walker) members(path string, value func(name, fpath string, tok json.Token) error, checkName func(name, fpath string) error) error {
	if err := w.enter(path); err != nil {
		return err
	}
	seen := make(map[string]bool)
	for w.dec.More() {
		tok, err := w.next(path, true)
		if err != nil {
			return err
		}
		name := tok.(string)
		fpath := joinField(path, name)
		if seen[name] {
			return Invalid(fpath, "duplicate member")
		}
		seen[name] = true
		if err := checkName(name, fpath); err != nil {
			return err
		}
		if tok, err = w.next(fpath, false); err != nil {
			return err
		}
		if err := value(name, fpath, tok); err != nil {
			return err
		}
	}
	return w.leave(path)
}

func checkMapKey(name string, kt reflect.Type, path string) error {
	if reflect.PointerTo(kt).Implements(textUnmarshalerType) {
		u := reflect.New(kt).Interface().(encoding.TextUnmarshaler)
		if u.UnmarshalText([]byte(name)) != nil {
			return Invalid(path, "invalid member name")
		}
		return nil
	}
	switch kt.Kind() {
	case reflect.String:
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if refCheckNumber(name, kt) != "" {
			return Invalid(path, "want member name that is an integer")
		}
		return nil
	}
	return Invalid(path, "unsupported map key type")
}

func (w *walker) array(elem reflect.Type, max int, path string) error {
	if err := w.enter(path); err != nil {
		return err
	}
	for i := 0; w.dec.More(); i++ {
		if max >= 0 && i >= max {
			return Invalid(path, fmt.Sprintf("want at most %d elements", max))
		}
		ipath := path + "[" + strconv.Itoa(i) + "]"
		tok, err := w.next(ipath, false)
		if err != nil {
			return err
		}
		if err := w.value(tok, elem, ipath); err != nil {
			return err
		}
	}
	return w.leave(path)
}

// leave reads the closing delimiter.
func (w *walker) leave(path string) error {
	w.depth--
	_, err := w.next(path, false)
	return err
}

// quoted checks a field tagged ",string": a string holding the JSON text of
// a string, number or boolean.
func (w *walker) quoted(tok json.Token, t reflect.Type, path string) error {
	if tok == nil && t.Kind() == reflect.Pointer {
		return nil
	}
	s, ok := tok.(string)
	if !ok {
		return Invalid(path, "want string, got "+tokenKind(tok))
	}
	if s != strings.TrimSpace(s) || json.Unmarshal([]byte(s), reflect.New(t).Interface()) != nil {
		return Invalid(path, "want string holding a JSON "+refWantKind(t))
	}
	return nil
}

func mismatch(path string, t reflect.Type, tok json.Token) error {
	want := refWantKind(t)
	if want == "" {
		return Invalid(path, "unsupported field type")
	}
	return Invalid(path, "want "+want+", got "+tokenKind(tok))
}

type fieldInfo struct {
	typ    reflect.Type
	quoted bool
}

var walkerFieldCache sync.Map // reflect.Type -> map[string]fieldInfo

// walkerStructFields maps the member names encoding/json decodes into t to their
// fields, following its rules for tags and embedded structs.
func walkerStructFields(t reflect.Type) map[string]fieldInfo {
	if f, ok := walkerFieldCache.Load(t); ok {
		return f.(map[string]fieldInfo)
	}
	type candidate struct {
		name   string
		depth  int
		tagged bool
		info   fieldInfo
	}
	var all []candidate
	visited := map[reflect.Type]bool{}
	level := []reflect.Type{t}
	for depth := 0; len(level) > 0; depth++ {
		var nextLevel []reflect.Type
		for _, st := range level {
			if visited[st] {
				continue
			}
			visited[st] = true
			for i := range st.NumField() {
				sf := st.Field(i)
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validTag(name) {
					name = ""
				}
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if sf.Anonymous {
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
					if name == "" && ft.Kind() == reflect.Struct {
						nextLevel = append(nextLevel, ft)
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				quoted := false
				if hasOption(opts, "string") {
					switch ft.Kind() {
					case reflect.Bool, reflect.String,
						reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
						reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
						reflect.Float32, reflect.Float64:
						quoted = true
					}
				}
				c := candidate{name: name, depth: depth, tagged: name != "", info: fieldInfo{typ: sf.Type, quoted: quoted}}
				if c.name == "" {
					c.name = sf.Name
				}
				all = append(all, c)
			}
		}
		level = nextLevel
	}
	// Dominance: the shallowest field wins; at equal depth a single tagged
	// field wins; otherwise the name is ambiguous and ignored.
	byName := map[string][]candidate{}
	var order []string
	for _, c := range all {
		if _, ok := byName[c.name]; !ok {
			order = append(order, c.name)
		}
		byName[c.name] = append(byName[c.name], c)
	}
	fields := make(map[string]fieldInfo, len(order))
	for _, name := range order {
		cs := byName[name]
		minDepth := cs[0].depth
		var top []candidate
		for _, c := range cs {
			if c.depth == minDepth {
				top = append(top, c)
			}
		}
		if len(top) > 1 {
			var tagged []candidate
			for _, c := range top {
				if c.tagged {
					tagged = append(tagged, c)
				}
			}
			if len(tagged) != 1 {
				continue
			}
			top = tagged
		}
		fields[name] = top[0].info
	}
	walkerFieldCache.Store(t, fields)
	return fields
}

func hasOption(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

// validTag mirrors encoding/json's rule for usable tag names.
func validTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
