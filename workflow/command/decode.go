package command

import (
	"bytes"
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
// Field rules, types and unknown members are Kubernetes' strict decoding
// (sigs.k8s.io/json, as for kubectl's manifests); a scan of the tokens adds
// what it does not check (the size, the depth, the text of every string,
// duplicates inside raw and interface values, nulls) and the paths. When a
// document has several problems the first in the document is reported.
// The value stored in v is encoding/json's (numbers in interface values are
// float64), so digests are unchanged.
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
	// The first problem in the document: a duplicate, a bad string or the
	// depth; a type, an unknown field or a null before the syntax error, if
	// any (decoded from the document cut after the last complete value and
	// closed); the syntax error.
	first := s.problem
	for _, p := range s.typed(rv.Type().Elem()) {
		if first == nil || p.offset < first.offset {
			first = p
		}
	}
	if s.syntax != nil && (first == nil || s.syntax.offset < first.offset) {
		first = s.syntax
	}
	if first != nil {
		return first.located(data)
	}
	if err := json.Unmarshal(data, v); err != nil {
		// The checks above accept only what encoding/json accepts; this is a
		// backstop, and its message may quote the value, so it is not passed on.
		return Invalid("", "invalid value")
	}
	return nil
}

// located is a refusal and where in the data it begins.
type located struct {
	offset int64
	err    error
	// at, when set (above 0), is one more than the offset where the
	// problem is, for the message: a syntax error lies after the start of
	// the token it is ordered by.
	at int64
	// suggest is the known member name nearest to an unknown one.
	suggest string
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

// located makes l's refusal a *LocatedError in data.
func (l *located) located(data []byte) error {
	ie, ok := l.err.(*InvalidError)
	if !ok {
		return l.err
	}
	at := l.offset
	if l.at > 0 {
		at = l.at - 1
	}
	line, column := lineColumn(data, at)
	return &LocatedError{InvalidError: ie, Line: line, Column: column, Suggestion: l.suggest}
}

// lineColumn is the 1-based line and column (in characters, a byte of
// invalid UTF-8 counting as one) of offset in data.
func lineColumn(data []byte, offset int64) (line, column int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
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
	for {
		for _, v := range s.values {
			if v.path == field {
				line, column = lineColumn(data, v.start)
				return line, column, true
			}
		}
		steps := parsePath(field)
		if field == "" || len(steps) == 0 {
			return 0, 0, false
		}
		field = pathOf(steps[:len(steps)-1])
	}
}

// pathOf is the path of steps, as the scan writes it.
func pathOf(steps []step) string {
	path := ""
	for _, st := range steps {
		if st.index >= 0 {
			path += "[" + strconv.Itoa(st.index) + "]"
			continue
		}
		path = joinField(path, st.name)
	}
	return path
}

// nearestMember is the member name of the struct type at parent (under
// root) closest to name: the same but for case, or at most two edits away
// (and fewer than half its length); "" when none is.
func nearestMember(root reflect.Type, parent []step, name string) string {
	t := typeAt(root, parent)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
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

// value is where one JSON value lies in the data, and its path.
type value struct {
	start, end int64 // end exclusive
	path       string
	steps      []step // for null values only: the path as steps
	delim      bool   // an object or an array
}

// step is one member name or array index of a path.
type step struct {
	name  string
	index int // -1 for a member
}

// member is an object member: the path Kubernetes' decoder reports for it
// (members joined with ".", indices in brackets) maps to ours.
type member struct {
	path   string
	offset int64
}

type scanned struct {
	data    []byte
	valid   []byte // data, or with a syntax error its valid start, closed
	values  []value
	nulls   []value
	numbers []value
	strings []value
	members map[string]member
	syntax  *located // invalid JSON or data after the object: nothing else is checked
	problem *located // the first other problem of the scan
}

// scan reads the tokens of data and records every value and member, the
// first syntax error, and the first duplicate member, bad string or
// excess depth.
func scan(data []byte) *scanned {
	s := &scanned{data: data, valid: data, members: map[string]member{}}
	w := &scanner{s: s, dec: json.NewDecoder(bytes.NewReader(data))}
	w.dec.UseNumber()
	tok, err := w.next("", false)
	if err != nil {
		s.syntax, s.valid = err, nil
		return s
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		s.syntax, s.valid = &located{offset: 0, err: Invalid("", "want object, got "+tokenKind(tok))}, nil
		return s
	}
	if err := w.value(tok, "", "", nil); err != nil {
		s.syntax = err
		// What was read up to the last complete value (and a member name
		// read before the error, with a null value), closed.
		s.valid = bytes.Clone(data[:w.good])
		if w.key > w.good {
			s.valid = append(append(s.valid, data[w.good:w.key]...), ":null"...)
		}
		s.valid = append(s.valid, w.closers()...)
		// The open values end at their closers.
		for k, i := range slices.Backward(w.opens) {
			s.values[i].end = int64(len(s.valid) - k)
		}
		return s
	}
	if _, err := w.dec.Token(); err != io.EOF {
		rest := data[w.good:]
		at := w.good + int64(len(rest)-len(bytes.TrimLeft(rest, " \t\r\n"))) + 1
		s.syntax = &located{offset: int64(len(data)), err: Invalid("", "data after the top-level object"), at: at}
		s.valid = data[:w.good]
		return s
	}
	if !utf8.Valid(data) && s.problem == nil {
		s.problem = &located{offset: int64(len(data)), err: Invalid("", "invalid UTF-8")}
	}
	return s
}

type scanner struct {
	s     *scanned
	dec   *json.Decoder
	start int64
	depth int
	good  int64  // the offset after the last complete value or opening delimiter
	key   int64  // after a member name whose value is not complete yet, else 0
	open  []byte // the closing delimiters of the open objects and arrays
	opens []int  // their values' indices
}

// closers closes the open objects and arrays, innermost first.
func (w *scanner) closers() []byte {
	out := slices.Clone(w.open)
	slices.Reverse(out)
	return out
}

// note records a problem that leaves the JSON valid; the first one counts.
func (w *scanner) note(offset int64, err error) {
	if w.s.problem == nil {
		w.s.problem = &located{offset: offset, err: err}
	}
}

// next reads one token. Strings are checked on their raw bytes, since the
// decoder has already replaced bad UTF-8 by the time it returns them.
func (w *scanner) next(path string, key bool) (json.Token, *located) {
	w.start = w.dec.InputOffset()
	tok, err := w.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, &located{offset: w.start, err: Invalid(path, "unexpected end of input"), at: int64(len(w.s.data)) + 1}
		case errors.As(err, &se):
			// The message says where: the line and column of the offset
			// (LocatedError).
			return nil, &located{offset: w.start, err: Invalid(path, "invalid JSON"), at: se.Offset + 1}
		default:
			return nil, &located{offset: w.start, err: Invalid(path, "invalid JSON")}
		}
	}
	if _, ok := tok.(string); ok {
		lit := w.s.data[w.start:w.dec.InputOffset()]
		if i := bytes.IndexByte(lit, '"'); i >= 0 {
			lit = lit[i:]
		}
		if problem := checkLiteral(lit); problem != "" {
			if key {
				problem += " in member name"
			}
			w.note(w.start, Invalid(path, problem))
		}
	}
	return tok, nil
}

// tokenStart is the offset of the token just read, past white space and
// separators.
func (w *scanner) tokenStart() int64 {
	lead := w.s.data[w.start:w.dec.InputOffset()]
	return w.start + int64(len(lead)-len(bytes.TrimLeft(lead, " \t\r\n,:")))
}

// value records the value that begins with tok, at path (sigsPath in the
// Kubernetes decoder's form), and scans what it holds.
func (w *scanner) value(tok json.Token, path, sigsPath string, steps []step) *located {
	v := value{start: w.tokenStart(), path: path}
	i := len(w.s.values)
	w.s.values = append(w.s.values, v)
	if d, ok := tok.(json.Delim); ok {
		w.s.values[i].delim = true
		closer := byte('}')
		if d == '[' {
			closer = ']'
		}
		w.open = append(w.open, closer)
		w.opens = append(w.opens, i)
		w.good = w.dec.InputOffset()
		w.depth++
		if w.depth > maxDepth {
			w.note(v.start, Invalid(path, fmt.Sprintf("nested deeper than %d", maxDepth)))
		}
		var err *located
		if d == '{' {
			err = w.object(path, sigsPath, steps)
		} else {
			err = w.array(path, sigsPath, steps)
		}
		w.depth--
		if err != nil {
			return err
		}
		if _, err := w.next(path, false); err != nil { // the closing delimiter
			return err
		}
		w.open, w.opens = w.open[:len(w.open)-1], w.opens[:len(w.opens)-1]
	}
	w.s.values[i].end = w.dec.InputOffset()
	w.good = w.s.values[i].end
	v.end, v.steps = w.s.values[i].end, steps
	switch tok.(type) {
	case nil:
		w.s.nulls = append(w.s.nulls, v)
	case json.Number:
		w.s.numbers = append(w.s.numbers, v)
	case string:
		w.s.strings = append(w.s.strings, v)
	}
	return nil
}

func (w *scanner) object(path, sigsPath string, steps []step) *located {
	seen := map[string]bool{}
	for w.dec.More() {
		tok, err := w.next(path, true)
		if err != nil {
			return err
		}
		name := tok.(string)
		at := w.tokenStart()
		fpath := joinField(path, name)
		fsigs := name
		if sigsPath != "" {
			fsigs = sigsPath + "." + name
		}
		if seen[name] {
			w.note(at, Invalid(fpath, "duplicate member"))
		}
		seen[name] = true
		if _, ok := w.s.members[fsigs]; !ok {
			w.s.members[fsigs] = member{path: fpath, offset: at}
		}
		w.key = w.dec.InputOffset()
		if tok, err = w.next(fpath, false); err != nil {
			return err
		}
		if err := w.value(tok, fpath, fsigs, append(steps[:len(steps):len(steps)], step{name: name, index: -1})); err != nil {
			return err
		}
	}
	return nil
}

func (w *scanner) array(path, sigsPath string, steps []step) *located {
	for i := 0; w.dec.More(); i++ {
		ipath := path + "[" + strconv.Itoa(i) + "]"
		tok, err := w.next(ipath, false)
		if err != nil {
			return err
		}
		if err := w.value(tok, ipath, sigsPath+"["+strconv.Itoa(i)+"]", append(steps[:len(steps):len(steps)], step{index: i})); err != nil {
			return err
		}
	}
	return nil
}

// typed runs Kubernetes' strict decoding of the (syntactically valid) data
// into a scratch value of type t and returns its refusals, located: the
// first type error and every unknown field before it (a type error hides
// the unknown fields, so its value is blanked and the decoding repeated),
// and every null t does not take.
func (s *scanned) typed(t reflect.Type) []*located {
	if s.valid == nil {
		return nil
	}
	// Checked first: on the same value, its problem is the one reported.
	var quoted []*located
	// A ",string" field holds the JSON text of its value, exactly (encoding/json
	// also takes "00" for 0, or " 1").
	for _, v := range s.strings {
		if !quotedAt(t, v.steps) {
			continue
		}
		target := typeAt(t, v.steps)
		var text string
		if json.Unmarshal(s.data[v.start:v.end], &text) != nil || target == nil {
			continue
		}
		if text != strings.TrimSpace(text) || json.Unmarshal([]byte(text), reflect.New(target).Interface()) != nil {
			quoted = append(quoted, &located{offset: v.start, err: Invalid(v.path, "want string holding a JSON "+wantKind(target))})
		}
	}
	out := quoted
	data := s.valid
	var shift int64
	for range len(s.values) + 1 {
		strict, err := sigsjson.UnmarshalStrict(data, reflect.New(t).Interface(), sigsjson.DisallowUnknownFields)
		for _, e := range strict {
			out = append(out, s.unknown(t, e))
		}
		if err == nil {
			break
		}
		var te *json.UnmarshalTypeError
		var p *located
		var v value
		if errors.As(err, &te) {
			te.Offset -= shift // back to the scanned data's offsets
			v = s.valueAt(te)
			p = &located{offset: v.start, err: Invalid(v.path, typeProblem(te, t, v))}
		} else {
			// Only the first: finding it blanks values one by one.
			if shift != 0 {
				break
			}
			p, v = s.other(t, err)
		}
		out = append(out, p)
		if v.end <= v.start {
			break
		}
		// Replace the value with null, which every type takes, and decode
		// again to see what it hid. Later errors lie after it: their offsets
		// are shifted by what the replacements changed.
		data = slices.Concat(data[:v.start+shift], []byte("null"), data[v.end+shift:])
		shift += 4 - (v.end - v.start)
	}
	for _, n := range s.nulls {
		if problem := nullProblem(t, n.steps); problem != "" {
			out = append(out, &located{offset: n.start, err: Invalid(n.path, problem)})
		}
	}
	// A number in an interface or a raw message must fit a float64, as
	// encoding/json would store it; the decoder does not look inside raw
	// messages.
	for _, n := range s.numbers {
		if target := typeAt(t, n.steps); target != nil && takesAny(target) {
			if problem := checkNumber(string(s.data[n.start:n.end]), anyType); problem != "" {
				out = append(out, &located{offset: n.start, err: Invalid(n.path, problem)})
			}
		}
	}
	return out
}

// unknown locates an unknown-field error by its path, and finds the
// member name of root's type it may have meant.
func (s *scanned) unknown(root reflect.Type, e error) *located {
	var fe sigsjson.FieldError
	if errors.As(e, &fe) {
		if m, ok := s.members[fe.FieldPath()]; ok {
			l := &located{offset: m.offset, err: Invalid(m.path, "unknown field")}
			if steps := parsePath(m.path); len(steps) > 0 && steps[len(steps)-1].index < 0 {
				l.suggest = nearestMember(root, steps[:len(steps)-1], steps[len(steps)-1].name)
			}
			return l
		}
	}
	return &located{offset: 0, err: Invalid("", "unknown field")}
}

// other locates a refusal the decoder gives without a position: an
// Unmarshaler's (time.Time, a base64 []byte, a ",string" field; command
// files use none of them). The culprit is the first value whose blanking
// (null of the same length) makes the refusal go away. Its message quotes
// values, so only its kind is kept.
func (s *scanned) other(t reflect.Type, err error) (*located, value) {
	for _, v := range s.values {
		if v.delim || s.data[v.start] == 'n' {
			continue
		}
		if v.end > int64(len(s.valid)) {
			break
		}
		blanked := slices.Concat(s.valid[:v.start], []byte("null"), s.valid[v.end:])
		_, again := sigsjson.UnmarshalStrict(blanked, reflect.New(t).Interface(), sigsjson.DisallowUnknownFields)
		if again == nil || again.Error() != err.Error() {
			return &located{offset: v.start, err: Invalid(v.path, otherProblem(err, t, v, s.data[v.start]))}, v
		}
	}
	return &located{offset: int64(len(s.data)), err: Invalid("", "invalid value")}, value{}
}

// otherProblem names the kind of an Unmarshaler's refusal of v.
func otherProblem(err error, root reflect.Type, v value, first byte) string {
	var b64 base64.CorruptInputError
	switch msg := err.Error(); {
	case errors.As(err, &b64):
		return "want base64 string"
	case strings.Contains(msg, ",string struct tag") && first != '"':
		return "want string, got " + rawKind([]byte{first})
	case strings.Contains(msg, ",string struct tag"):
		if target := typeAtPath(root, v.path); target != nil {
			return "want string holding a JSON " + wantKind(target)
		}
	}
	return "invalid value"
}

// valueAt is the value a type error is about: the object or array that
// starts just before its offset, or the literal that ends at it (or one
// byte before it, when the decoder has read the separator that follows).
func (s *scanned) valueAt(te *json.UnmarshalTypeError) value {
	delim := te.Value == "object" || te.Value == "array"
	for _, slack := range []int64{0, 1} {
		for _, v := range s.values {
			switch {
			case delim && v.delim && v.start == te.Offset-1-slack:
				return v
			case !delim && !v.delim && v.end == te.Offset-slack:
				return v
			}
		}
	}
	best := -1
	for i, v := range s.values {
		if v.start <= te.Offset && te.Offset <= v.end && (best < 0 || v.end-v.start < s.values[best].end-s.values[best].start) {
			best = i
		}
	}
	if best < 0 {
		return value{}
	}
	return s.values[best]
}

// typeProblem says what is wrong with the value a type error is about.
func typeProblem(te *json.UnmarshalTypeError, root reflect.Type, v value) string {
	if lit, ok := strings.CutPrefix(te.Value, "number "); ok {
		// A number that does not fit: out of range, a fraction or a sign.
		if target := typeAtPath(root, v.path); target != nil && target.Kind() == reflect.Interface {
			return checkNumber(lit, target)
		}
		if problem := checkNumber(lit, te.Type); problem != "" && problem != "wrong-type" {
			return problem
		}
	}
	got := te.Value
	switch {
	case strings.HasPrefix(got, "number"):
		got = "number"
	case got == "bool":
		got = "boolean"
	}
	want := wantKind(te.Type)
	if want == "" {
		return "unsupported field type"
	}
	return "want " + want + ", got " + got
}

// nullProblem says why t does not take null at steps, or "" when it does:
// a pointer or an interface takes null (absent), and so does a type whose
// UnmarshalJSON accepts it (json.RawMessage).
func nullProblem(t reflect.Type, steps []step) string {
	target := typeAt(t, steps)
	switch {
	case target == nil, target.Kind() == reflect.Pointer, target.Kind() == reflect.Interface:
		return "" // no such field (reported as unknown), or absent
	case quotedAt(t, steps):
		return "want string, got null"
	case target.Implements(jsonUnmarshalerType) || reflect.PointerTo(target).Implements(jsonUnmarshalerType):
		if reflect.New(target).Interface().(json.Unmarshaler).UnmarshalJSON([]byte("null")) == nil {
			return ""
		}
		return "invalid value"
	}
	if want := wantKind(target); want != "" {
		return "want " + want + ", got null"
	}
	return "unsupported field type"
}

// typeAt is the Go type the value at steps decodes into, or nil when steps
// leads to no field. Under an interface, a raw message or another
// Unmarshaler, every value takes anything: the result is any.
func typeAt(t reflect.Type, steps []step) reflect.Type {
	for _, st := range steps {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() == reflect.Interface || t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
			return anyType
		}
		switch {
		case t.Kind() == reflect.Struct && st.index < 0:
			f, ok := jsonFields(t)[st.name]
			if !ok {
				return nil
			}
			t = f
		case t.Kind() == reflect.Map && st.index < 0, (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && st.index >= 0:
			t = t.Elem()
		default:
			return nil // a type error, reported as such
		}
	}
	return t
}

// typeAtPath is typeAt for a value's path, found among the scanned nulls'
// and values' steps; it is only asked about numbers in interfaces, whose
// path is plain.
func typeAtPath(root reflect.Type, path string) reflect.Type {
	return typeAt(root, parsePath(path))
}

// parsePath splits a path made by joinField and array indices back into
// steps.
func parsePath(path string) []step {
	var steps []step
	for path != "" {
		switch {
		case strings.HasPrefix(path, "[\""):
			end := strings.Index(path, "\"]")
			name, err := strconv.Unquote(path[1 : end+1])
			if end < 0 || err != nil {
				return steps
			}
			steps = append(steps, step{name: name, index: -1})
			path = path[end+2:]
		case strings.HasPrefix(path, "["):
			end := strings.IndexByte(path, ']')
			i, err := strconv.Atoi(path[1:max(end, 1)])
			if end < 0 || err != nil {
				return steps
			}
			steps = append(steps, step{index: i})
			path = path[end+1:]
		default:
			path = strings.TrimPrefix(path, ".")
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			steps = append(steps, step{name: path[:end], index: -1})
			path = path[end:]
		}
	}
	return steps
}

var anyType = reflect.TypeFor[any]()

// takesAny reports whether t (a pointer to it) is an interface or an
// Unmarshaler, whose value is checked as encoding/json would decode it
// into an interface.
func takesAny(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Interface || t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType)
}

// quotedAt reports whether the member at steps is a field tagged ",string"
// of a type the option applies to (a string, number or boolean).
func quotedAt(t reflect.Type, steps []step) bool {
	if len(steps) == 0 || steps[len(steps)-1].index >= 0 {
		return false
	}
	parent := typeAt(t, steps[:len(steps)-1])
	for parent != nil && parent.Kind() == reflect.Pointer {
		parent = parent.Elem()
	}
	if parent == nil || parent.Kind() != reflect.Struct {
		return false
	}
	return quotedFields(parent)[steps[len(steps)-1].name]
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
