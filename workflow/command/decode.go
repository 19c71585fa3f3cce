package command

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

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
//   - a value of the wrong JSON type, or a number that does not fit the field;
//   - null, except where the field is a pointer or an interface: a field
//     that may be absent is a pointer, and null means absent;
//   - invalid UTF-8 and unpaired UTF-16 surrogate escapes, which
//     encoding/json would replace with U+FFFD;
//   - nesting deeper than 32.
//
// A scan reads the tokens once and checks what needs no type (the syntax,
// the depth, the text of every string, duplicates); a walk of those tokens
// along v's type checks every member and value as encoding/json decodes it.
// Kubernetes' strict decoding (sigs.k8s.io/json, as for kubectl's
// manifests) then has the last word on fields and types. When a document
// has several problems the first in the document is reported. The value
// stored in v is encoding/json's (numbers in interface values are float64),
// so digests are unchanged.
//
// Every refusal is an *InvalidError whose Field is the JSON path of the
// offending member; no message contains a value from data.
func DecodeStrict(data []byte, v any) error { return decodeStrict(data, nil, v) }

// decodeStrict is DecodeStrict with the scan of data made already (nil:
// scanned here): a document decoded twice (its envelope, then the whole of
// it) is scanned once.
func decodeStrict(data []byte, s *scanned, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("command: DecodeStrict needs a non-nil pointer, got %T", v)
	}
	if len(data) > MaxSize {
		return Invalid("", fmt.Sprintf("larger than %d bytes", MaxSize))
	}
	if s == nil {
		s = scan(data)
	}
	first := s.first
	if s.object() {
		c := &checker{toks: s.tokens, data: data}
		if p := c.value(rv.Type().Elem()); p != nil && (first == nil || p.before(first)) {
			first = p
		}
	}
	if first != nil {
		line, column := lineColumn(data, first.at)
		return &LocatedError{InvalidError: first.err, Line: line, Column: column, Suggestion: first.suggest}
	}
	strict, err := sigsjson.UnmarshalStrict(data, reflect.New(rv.Type().Elem()).Interface(),
		sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil || len(strict) > 0 || json.Unmarshal(data, v) != nil {
		// The walk accepts only what these accept; this is a backstop, and
		// their messages may quote the value, so they are not passed on.
		return Invalid("", "invalid value")
	}
	return nil
}

// LocatedError is a refusal of DecodeStrict located in the document: the
// *InvalidError (errors.As finds it; Field and Problem are its), the line
// and column where the offending member or value begins (1-based; columns
// count characters), and for an unknown member the nearest member name the
// type knows, if one is close. Like the InvalidError, it never holds a
// value from the document.
type LocatedError struct {
	*InvalidError
	Line, Column int
	// Suggestion is a member name of the same object's type ("secretName"
	// for "secertName"), or "".
	Suggestion string
}

func (e *LocatedError) Error() string {
	msg := e.InvalidError.Error()
	if e.Line > 0 {
		msg += fmt.Sprintf(" (line %d, column %d)", e.Line, e.Column)
	}
	if e.Suggestion != "" {
		msg += "; did you mean " + e.Suggestion + "?"
	}
	return msg
}

func (e *LocatedError) Unwrap() error { return e.InvalidError }

// lineColumn is the 1-based line and column (in characters, a byte of
// invalid UTF-8 counting as one) of offset in data.
func lineColumn(data []byte, offset int64) (line, column int) {
	before := data[:min(max(offset, 0), int64(len(data)))]
	line = 1 + bytes.Count(before, []byte{'\n'})
	if i := bytes.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	return line, 1 + utf8.RuneCount(before)
}

// Locate is the line and column where the value at field (a path as
// InvalidError.Field gives it: "spec.secrets[0].name") begins in data, or
// where the nearest enclosing value present begins (a required member is
// absent: its object); ok is false when data holds none of them.
func Locate(data []byte, field string) (line, column int, ok bool) {
	if len(data) > MaxSize {
		return 0, 0, false
	}
	s := scan(data)
	if !s.object() {
		return 0, 0, false
	}
	best := -1
	for i, tk := range s.tokens {
		p := tk.path
		within := p == "" || p == field || strings.HasPrefix(field, p) && strings.ContainsRune(".[", rune(field[len(p)]))
		if tk.kind == kindValue && within && (best < 0 || len(p) > len(s.tokens[best].path)) {
			best = i
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	line, column = lineColumn(data, s.tokens[best].start)
	return line, column, true
}

// A problem is a refusal, the token where it is found and, among the
// problems of one token, its rank: the first of the document is reported.
type problem struct {
	index, rank int
	at          int64 // where it is shown
	err         *InvalidError
	suggest     string // for an unknown member: the name probably meant
}

const (
	rankCount  = iota // an array holds more elements than the Go array
	rankText          // the token itself: syntax, UTF-8, surrogates
	rankRepeat        // a duplicate member name
	rankType          // the token against the type
	rankDepth         // the object or array it opens is too deep
)

func (p *problem) before(q *problem) bool {
	return p.index < q.index || p.index == q.index && p.rank < q.rank
}

// Kinds of token.
const (
	kindValue = iota // the first token of a value
	kindName         // a member name
	kindClose        // the closing delimiter of an object or array
)

// token is one token of the document: start and end are its offsets
// (start after any white space or separator), path the JSON path of the
// value it is, holds or names.
type token struct {
	tok        json.Token // as json.Decoder returns it, numbers as json.Number
	start, end int64
	path       string
	kind       int
}

// scanned is the tokens of a document, up to a syntax error if there is
// one, and the first problem found without a type.
type scanned struct {
	tokens []token
	first  *problem
}

// object reports whether the document is an object, which a type can walk.
func (s *scanned) object() bool { return len(s.tokens) > 0 && s.tokens[0].tok == json.Delim('{') }

type scanner struct {
	*scanned
	dec  *json.Decoder
	data []byte
}

func scan(data []byte) *scanned {
	sc := &scanner{scanned: &scanned{}, dec: json.NewDecoder(bytes.NewReader(data)), data: data}
	sc.dec.UseNumber()
	tok, ok := sc.next("", kindValue)
	switch {
	case !ok:
	case tok != json.Delim('{'):
		sc.note(0, rankRepeat, 0, Invalid("", "want object, got "+tokenKind(tok)))
	case sc.value(tok, "", 1):
		end := sc.tokens[len(sc.tokens)-1].end
		if _, err := sc.dec.Token(); err != io.EOF {
			rest := data[end:]
			at := end + int64(len(rest)-len(bytes.TrimLeft(rest, " \t\r\n")))
			sc.note(len(sc.tokens), rankText, at, Invalid("", "data after the top-level object"))
		} else if !utf8.Valid(data) {
			sc.note(len(sc.tokens), rankText, int64(len(data)), Invalid("", "invalid UTF-8"))
		}
	}
	return sc.scanned
}

// note records a problem; problems are found in order, and the first counts.
func (sc *scanner) note(index, rank int, at int64, err *InvalidError) {
	if sc.first == nil {
		sc.first = &problem{index: index, rank: rank, at: at, err: err}
	}
}

// next reads one token, at path, and checks the text of a string on its
// raw bytes (the decoder replaces bad UTF-8 before returning it); false
// at a syntax error.
func (sc *scanner) next(path string, kind int) (json.Token, bool) {
	pre := sc.dec.InputOffset()
	tok, err := sc.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			sc.note(len(sc.tokens), rankText, int64(len(sc.data)), Invalid(path, "unexpected end of input"))
		case errors.As(err, &se): // the location says where
			sc.note(len(sc.tokens), rankText, se.Offset, Invalid(path, "invalid JSON"))
		default:
			sc.note(len(sc.tokens), rankText, pre, Invalid(path, "invalid JSON"))
		}
		return nil, false
	}
	end := sc.dec.InputOffset()
	start := end - int64(len(bytes.TrimLeft(sc.data[pre:end], " \t\r\n,:")))
	sc.tokens = append(sc.tokens, token{tok: tok, start: start, end: end, path: path, kind: kind})
	if _, ok := tok.(string); ok {
		if problem := checkLiteral(sc.data[start:end]); problem != "" {
			if kind == kindName {
				problem += " in member name"
			}
			sc.note(len(sc.tokens)-1, rankText, pre, Invalid(path, problem))
		}
	}
	return tok, true
}

// value scans what the value that begins with tok holds, at nesting depth
// (the top-level object's is 1); false at a syntax error.
func (sc *scanner) value(tok json.Token, path string, depth int) bool {
	delim, ok := tok.(json.Delim)
	if !ok {
		return true
	}
	if open := len(sc.tokens) - 1; depth > maxDepth {
		sc.note(open, rankDepth, sc.tokens[open].start, Invalid(path, fmt.Sprintf("nested deeper than %d", maxDepth)))
	}
	seen := map[string]bool{}
	for i := 0; sc.dec.More(); i++ {
		vpath := path + "[" + strconv.Itoa(i) + "]"
		if delim == '{' {
			tok, ok := sc.next(path, kindName)
			if !ok {
				return false
			}
			name, n := tok.(string), len(sc.tokens)-1
			vpath = joinField(path, name)
			sc.tokens[n].path = vpath
			if seen[name] {
				sc.note(n, rankRepeat, sc.tokens[n].start, Invalid(vpath, "duplicate member"))
			}
			seen[name] = true
		}
		if tok, ok := sc.next(vpath, kindValue); !ok || !sc.value(tok, vpath, depth+1) {
			return false
		}
	}
	_, ok = sc.next(path, kindClose)
	return ok
}

// checker walks scanned tokens along a Go type, as the walker DecodeStrict
// was once written as: each value is checked against the type
// encoding/json would decode it into, and the first problem is returned.
type checker struct {
	toks []token
	data []byte
	i    int  // the next token
	out  bool // the tokens ended (a syntax error) inside the value
}

var (
	textType  = reflect.TypeFor[encoding.TextUnmarshaler]()
	anyObject = reflect.TypeFor[map[string]any]()
	anyArray  = reflect.TypeFor[[]any]()
	anyType   = reflect.TypeFor[any]()
)

func (c *checker) fail(k, rank int, path, what string) *problem {
	return &problem{index: k, rank: rank, at: c.toks[k].start, err: Invalid(path, what)}
}

// value checks the value that begins at the next token against t.
func (c *checker) value(t reflect.Type) *problem {
	if c.i >= len(c.toks) {
		c.out = true
		return nil
	}
	k, tk := c.i, c.toks[c.i]
	c.i++
	for t.Kind() == reflect.Pointer {
		if tk.tok == nil {
			return nil
		}
		t = t.Elem()
	}
	switch {
	case t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType):
		c.i = k
		if p := c.value(anyType); p != nil || c.out {
			return p
		}
		raw := c.data[tk.start:c.toks[c.i-1].end]
		if reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw) != nil {
			return &problem{index: c.i - 1, rank: rankType, at: tk.start, err: Invalid(tk.path, "invalid value")}
		}
		return nil
	case tk.tok == nil && t.Kind() == reflect.Interface:
		return nil
	case tk.tok != nil && reflect.PointerTo(t).Implements(textType):
		s, ok := tk.tok.(string)
		if !ok {
			return c.fail(k, rankType, tk.path, "want string, got "+tokenKind(tk.tok))
		}
		if reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)) != nil {
			return c.fail(k, rankType, tk.path, "invalid value")
		}
		return nil
	}
	return c.kind(k, t)
}

// kind checks token k, not null unless t is an interface, against t's kind.
func (c *checker) kind(k int, t reflect.Type) *problem {
	empty := t.Kind() == reflect.Interface && t.NumMethod() == 0
	switch tok := c.toks[k].tok.(type) {
	case json.Delim:
		switch {
		case tok == '{' && (t.Kind() == reflect.Struct || t.Kind() == reflect.Map):
			return c.object(t)
		case tok == '{' && empty:
			return c.object(anyObject)
		case tok == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			return c.array(k, t)
		case tok == '[' && empty:
			return c.array(k, anyArray)
		}
	case string:
		switch {
		case t.Kind() == reflect.String && t != numberType, empty:
			return nil
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
			if _, err := base64.StdEncoding.DecodeString(tok); err != nil {
				return c.fail(k, rankType, c.toks[k].path, "want base64 string")
			}
			return nil
		}
	case json.Number:
		if problem := checkNumber(string(tok), t); problem != "wrong-type" {
			if problem != "" {
				return c.fail(k, rankType, c.toks[k].path, problem)
			}
			return nil
		}
	case bool:
		if t.Kind() == reflect.Bool || empty {
			return nil
		}
	}
	if want := wantKind(t); want != "" {
		return c.fail(k, rankType, c.toks[k].path, "want "+want+", got "+tokenKind(c.toks[k].tok))
	}
	return c.fail(k, rankType, c.toks[k].path, "unsupported field type")
}

// object checks the members of an object (its '{' read) against t, a
// struct or a map.
func (c *checker) object(t reflect.Type) *problem {
	for c.i < len(c.toks) && c.toks[c.i].kind == kindName {
		n := c.i
		name, path := c.toks[n].tok.(string), c.toks[n].path
		c.i++
		if t.Kind() == reflect.Map {
			if problem := keyProblem(name, t.Key()); problem != "" {
				return c.fail(n, rankType, path, problem)
			}
			if p := c.value(t.Elem()); p != nil || c.out {
				return p
			}
			continue
		}
		var p *problem
		switch ft, known := jsonFields(t)[name]; {
		case !known:
			p = c.fail(n, rankType, path, "unknown field")
			p.suggest = nearestMember(t, name)
			return p
		case quotedFields(t)[name]:
			p = c.quoted(ft)
		default:
			p = c.value(ft)
		}
		if p != nil || c.out {
			return p
		}
	}
	return c.close()
}

// array checks the elements of an array (its '[' at token k) against t, a
// slice or an array.
func (c *checker) array(k int, t reflect.Type) *problem {
	for i := 0; c.i < len(c.toks) && c.toks[c.i].kind != kindClose; i++ {
		if t.Kind() == reflect.Array && i >= t.Len() {
			return c.fail(c.i, rankCount, c.toks[k].path, fmt.Sprintf("want at most %d elements", t.Len()))
		}
		if p := c.value(t.Elem()); p != nil || c.out {
			return p
		}
	}
	return c.close()
}

// close reads the closing delimiter.
func (c *checker) close() *problem {
	c.out = c.i >= len(c.toks)
	c.i++
	return nil
}

// quoted checks a field tagged ",string": a string holding the JSON text
// of a string, number or boolean, exactly (encoding/json also takes " 1").
func (c *checker) quoted(t reflect.Type) *problem {
	if c.i >= len(c.toks) {
		c.out = true
		return nil
	}
	k := c.i
	c.i++
	s, ok := c.toks[k].tok.(string)
	switch {
	case !ok:
		return c.fail(k, rankType, c.toks[k].path, "want string, got "+tokenKind(c.toks[k].tok))
	case s != strings.TrimSpace(s) || json.Unmarshal([]byte(s), reflect.New(t).Interface()) != nil:
		return c.fail(k, rankType, c.toks[k].path, "want string holding a JSON "+wantKind(t))
	}
	return nil
}

// keyProblem says why name is no key of a map with key type t, or "".
func keyProblem(name string, t reflect.Type) string {
	switch {
	case reflect.PointerTo(t).Implements(textType):
		if reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(name)) != nil {
			return "invalid member name"
		}
	case t.Kind() == reflect.String:
	case strings.HasSuffix(wantKind(t), "integer"):
		if checkNumber(name, t) != "" {
			return "want member name that is an integer"
		}
	default:
		return "unsupported map key type"
	}
	return ""
}

// nearestMember is the member name of struct type t closest to name: the
// same but for case, or at most two edits away (and fewer than half its
// length); "" when none is.
func nearestMember(t reflect.Type, name string) string {
	best, bestDistance := "", 3
	for known := range jsonFields(t) {
		if strings.EqualFold(known, name) {
			return known
		}
		d := editDistance(strings.ToLower(known), strings.ToLower(name))
		if 2*d >= len(known) {
			continue
		}
		if d < bestDistance || d == bestDistance && known < best {
			best, bestDistance = known, d
		}
	}
	return best
}

// editDistance is the Damerau-Levenshtein distance (adjacent
// transpositions count one) between a and b, in bytes.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

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

var jsonFieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps the member names encoding/json decodes into struct type
// t to their types: a field's json tag name or its Go name; a promoted
// field of an embedded struct at the shallowest depth, a tagged one winning
// a tie; ambiguous names are left out.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := jsonFieldCache.Load(t); ok {
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
	jsonFieldCache.Store(t, fields)
	return fields
}

// maxDepth bounds object and array nesting; command files are shallow.
const maxDepth = 32

var (
	numberType          = reflect.TypeFor[json.Number]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// checkNumber returns "" when s fits t, a problem when it does not, and
// "wrong-type" when t takes no number at all.
func checkNumber(s string, t reflect.Type) string {
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
		return "want " + wantKind(t) + ", got number"
	}
}

// wantKind names the JSON type that t takes, or "" if it takes none.
func wantKind(t reflect.Type) string {
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

func tokenKind(tok json.Token) string {
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '[' {
			return "array"
		}
		return "object"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "unknown"
}

// checkLiteral checks the raw bytes of a JSON string literal, quotes
// included, for invalid UTF-8 and unpaired surrogate escapes.
func checkLiteral(lit []byte) string {
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
		r := hex4(lit[i+1 : i+5])
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return "unpaired UTF-16 surrogate escape"
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 < end && lit[i+1] == '\\' && lit[i+2] == 'u' {
				if r2 := hex4(lit[i+3 : i+7]); r2 >= 0xDC00 && r2 <= 0xDFFF {
					i += 6
					continue
				}
			}
			return "unpaired UTF-16 surrogate escape"
		}
	}
	return ""
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(d)
	}
	return r
}

// joinField appends member name to path: "spec.keyId", or
// `spec.data["tls.crt"]` for names that are not plain words.
func joinField(path, name string) string {
	if plainName(name) {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	const maxName = 64
	if len(name) > maxName {
		cut := maxName
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut] + "..."
	}
	return path + "[" + strconv.Quote(name) + "]"
}

func plainName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c == '-' || c < utf8.RuneSelf && (unicode.IsLetter(c) || unicode.IsDigit(c))) {
			return false
		}
	}
	return true
}
