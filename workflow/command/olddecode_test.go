package command

// The decoder DecodeStrict replaced (sigs.k8s.io/json and a scan of the
// tokens, merged by offset), kept as a test-only copy: the rewrite must
// refuse exactly as it did, at the same line and column with the same
// suggestion, and Locate must find the same places. It shares LocatedError,
// lineColumn, editDistance, tokenKind and joinField with the rewrite; its
// generic helpers (refJSONFields, quotedFields, refCheckNumber, refWantKind,
// refCheckLiteral) are refhelpers_test.go's.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	sigsjson "sigs.k8s.io/json"
)

// oldDecodeStrict decodes data, a JSON object, into v, a non-nil pointer, and
// refuses anything encoding/json would accept silently or lossily:
//
//   - data larger than MaxSize;
//   - a top-level oldValue that is not an object, or data after it other than
//     white space;
//   - a oldMember name that matches no field (names match json tags exactly,
//     not case-insensitively);
//   - a oldMember name repeated in one object, at any depth, including inside
//     json.RawMessage and interface values;
//   - a oldValue of the wrong JSON type, or a number that does not fit the field;
//   - null, except where the field is a pointer or an interface: a field
//     that may be absent is a pointer, and null means absent;
//   - invalid UTF-8 and unpaired UTF-16 surrogate escapes, which
//     encoding/json would replace with U+FFFD;
//   - nesting deeper than 32.
//
// Field rules, types and unknown members are Kubernetes' strict decoding
// (sigs.k8s.io/json, as for kubectl's manifests); a oldScan of the tokens adds
// what it does not check (the size, the depth, the text of every string,
// duplicates inside raw and interface values, nulls) and the paths. When a
// document has several problems the first in the document is reported.
// The oldValue stored in v is encoding/json's (numbers in interface values are
// float64), so digests are unchanged.
//
// Every refusal is an *InvalidError whose Field is the JSON path of the
// offending oldMember; no message contains a oldValue from data.
func oldDecodeStrict(data []byte, v any) error { return oldDecodeScanned(data, nil, v) }

// oldDecodeScanned is oldDecodeStrict with the oldScan of data made already (nil:
// oldScanned here): a document decoded twice (its envelope, then the whole of
// it) is oldScanned once.
func oldDecodeScanned(data []byte, s *oldScanned, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("command: DecodeStrict needs a non-nil pointer, got %T", v)
	}
	if len(data) > MaxSize {
		return Invalid("", fmt.Sprintf("larger than %d bytes", MaxSize))
	}
	if s == nil {
		s = oldScan(data)
	}
	// The first problem in the document: a duplicate, a bad string or the
	// depth; a type, an unknown field or a null before the syntax error, if
	// any (decoded from the document cut after the last complete oldValue and
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
		// backstop, and its message may quote the oldValue, so it is not passed on.
		return Invalid("", "invalid value")
	}
	return nil
}

// oldLocated is a refusal and where in the data it begins.
type oldLocated struct {
	offset int64
	err    error
	// at, when set (above 0), is one more than the offset where the
	// problem is, for the message: a syntax error lies after the start of
	// the token it is ordered by.
	at int64
	// suggest is the known oldMember name nearest to an unknown one.
	suggest string
}

// oldLocated makes l's refusal a *LocatedError in data.
func (l *oldLocated) located(data []byte) error {
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

// oldLocate is the line and column where the oldValue at field (a path as
// InvalidError.Field gives it: "spec.secrets[0].name") begins in data, or
// where the nearest enclosing oldValue present begins (a required oldMember is
// absent: its object); ok is false when data holds none of them.
func oldLocate(data []byte, field string) (line, column int, ok bool) {
	if len(data) > MaxSize {
		return 0, 0, false
	}
	s := oldScan(data)
	for {
		for _, v := range s.values {
			if v.path == field {
				line, column = lineColumn(data, v.start)
				return line, column, true
			}
		}
		steps := oldParsePath(field)
		if field == "" || len(steps) == 0 {
			return 0, 0, false
		}
		field = oldPathOf(steps[:len(steps)-1])
	}
}

// oldPathOf is the path of steps, as the oldScan writes it.
func oldPathOf(steps []oldStep) string {
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

// oldNearestMember is the oldMember name of the struct type at parent (under
// root) closest to name: the same but for case, or at most two edits away
// (and fewer than half its length); "" when none is.
func oldNearestMember(root reflect.Type, parent []oldStep, name string) string {
	t := oldTypeAt(root, parent)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	best, bestDistance := "", 3
	for known := range refJSONFields(t) {
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

// oldValue is where one JSON oldValue lies in the data, and its path.
type oldValue struct {
	start, end int64 // end exclusive
	path       string
	steps      []oldStep // for null values only: the path as steps
	delim      bool      // an object or an array
}

// oldStep is one oldMember name or array index of a path.
type oldStep struct {
	name  string
	index int // -1 for a oldMember
}

// oldMember is an object oldMember: the path Kubernetes' decoder reports for it
// (members joined with ".", indices in brackets) maps to ours.
type oldMember struct {
	path   string
	offset int64
}

type oldScanned struct {
	data    []byte
	valid   []byte // data, or with a syntax error its valid start, closed
	values  []oldValue
	nulls   []oldValue
	numbers []oldValue
	strings []oldValue
	members map[string]oldMember
	syntax  *oldLocated // invalid JSON or data after the object: nothing else is checked
	problem *oldLocated // the first other problem of the oldScan
}

// oldScan reads the tokens of data and records every oldValue and oldMember, the
// first syntax error, and the first duplicate oldMember, bad string or
// excess depth.
func oldScan(data []byte) *oldScanned {
	s := &oldScanned{data: data, valid: data, members: map[string]oldMember{}}
	w := &oldScanner{s: s, dec: json.NewDecoder(bytes.NewReader(data))}
	w.dec.UseNumber()
	tok, err := w.next("", false)
	if err != nil {
		s.syntax, s.valid = err, nil
		return s
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		s.syntax, s.valid = &oldLocated{offset: 0, err: Invalid("", "want object, got "+tokenKind(tok))}, nil
		return s
	}
	if err := w.value(tok, "", "", nil); err != nil {
		s.syntax = err
		// What was read up to the last complete oldValue (and a oldMember name
		// read before the error, with a null oldValue), closed.
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
		s.syntax = &oldLocated{offset: int64(len(data)), err: Invalid("", "data after the top-level object"), at: at}
		s.valid = data[:w.good]
		return s
	}
	if !utf8.Valid(data) && s.problem == nil {
		s.problem = &oldLocated{offset: int64(len(data)), err: Invalid("", "invalid UTF-8")}
	}
	return s
}

type oldScanner struct {
	s     *oldScanned
	dec   *json.Decoder
	start int64
	depth int
	good  int64  // the offset after the last complete oldValue or opening delimiter
	key   int64  // after a oldMember name whose oldValue is not complete yet, else 0
	open  []byte // the closing delimiters of the open objects and arrays
	opens []int  // their values' indices
}

// closers closes the open objects and arrays, innermost first.
func (w *oldScanner) closers() []byte {
	out := slices.Clone(w.open)
	slices.Reverse(out)
	return out
}

// note records a problem that leaves the JSON valid; the first one counts.
func (w *oldScanner) note(offset int64, err error) {
	if w.s.problem == nil {
		w.s.problem = &oldLocated{offset: offset, err: err}
	}
}

// next reads one token. Strings are checked on their raw bytes, since the
// decoder has already replaced bad UTF-8 by the time it returns them.
func (w *oldScanner) next(path string, key bool) (json.Token, *oldLocated) {
	w.start = w.dec.InputOffset()
	tok, err := w.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, &oldLocated{offset: w.start, err: Invalid(path, "unexpected end of input"), at: int64(len(w.s.data)) + 1}
		case errors.As(err, &se):
			// The message says where: the line and column of the offset
			// (LocatedError).
			return nil, &oldLocated{offset: w.start, err: Invalid(path, "invalid JSON"), at: se.Offset + 1}
		default:
			return nil, &oldLocated{offset: w.start, err: Invalid(path, "invalid JSON")}
		}
	}
	if _, ok := tok.(string); ok {
		lit := w.s.data[w.start:w.dec.InputOffset()]
		if i := bytes.IndexByte(lit, '"'); i >= 0 {
			lit = lit[i:]
		}
		if problem := refCheckLiteral(lit); problem != "" {
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
func (w *oldScanner) tokenStart() int64 {
	lead := w.s.data[w.start:w.dec.InputOffset()]
	return w.start + int64(len(lead)-len(bytes.TrimLeft(lead, " \t\r\n,:")))
}

// oldValue records the oldValue that begins with tok, at path (sigsPath in the
// Kubernetes decoder's form), and scans what it holds.
func (w *oldScanner) value(tok json.Token, path, sigsPath string, steps []oldStep) *oldLocated {
	v := oldValue{start: w.tokenStart(), path: path}
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
		var err *oldLocated
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

func (w *oldScanner) object(path, sigsPath string, steps []oldStep) *oldLocated {
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
			w.s.members[fsigs] = oldMember{path: fpath, offset: at}
		}
		w.key = w.dec.InputOffset()
		if tok, err = w.next(fpath, false); err != nil {
			return err
		}
		if err := w.value(tok, fpath, fsigs, append(steps[:len(steps):len(steps)], oldStep{name: name, index: -1})); err != nil {
			return err
		}
	}
	return nil
}

func (w *oldScanner) array(path, sigsPath string, steps []oldStep) *oldLocated {
	for i := 0; w.dec.More(); i++ {
		ipath := path + "[" + strconv.Itoa(i) + "]"
		tok, err := w.next(ipath, false)
		if err != nil {
			return err
		}
		if err := w.value(tok, ipath, sigsPath+"["+strconv.Itoa(i)+"]", append(steps[:len(steps):len(steps)], oldStep{index: i})); err != nil {
			return err
		}
	}
	return nil
}

// typed runs Kubernetes' strict decoding of the (syntactically valid) data
// into a scratch oldValue of type t and returns its refusals, oldLocated: the
// first type error and every unknown field before it (a type error hides
// the unknown fields, so its oldValue is blanked and the decoding repeated),
// and every null t does not take.
func (s *oldScanned) typed(t reflect.Type) []*oldLocated {
	if s.valid == nil {
		return nil
	}
	// Checked first: on the same oldValue, its problem is the one reported.
	var quoted []*oldLocated
	// A ",string" field holds the JSON text of its oldValue, exactly (encoding/json
	// also takes "00" for 0, or " 1").
	for _, v := range s.strings {
		if !oldQuotedAt(t, v.steps) {
			continue
		}
		target := oldTypeAt(t, v.steps)
		var text string
		if json.Unmarshal(s.data[v.start:v.end], &text) != nil || target == nil {
			continue
		}
		if text != strings.TrimSpace(text) || json.Unmarshal([]byte(text), reflect.New(target).Interface()) != nil {
			quoted = append(quoted, &oldLocated{offset: v.start, err: Invalid(v.path, "want string holding a JSON "+refWantKind(target))})
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
		var p *oldLocated
		var v oldValue
		if errors.As(err, &te) {
			te.Offset -= shift // back to the oldScanned data's offsets
			v = s.valueAt(te)
			p = &oldLocated{offset: v.start, err: Invalid(v.path, oldTypeProblem(te, t, v))}
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
		// Replace the oldValue with null, which every type takes, and decode
		// again to see what it hid. Later errors lie after it: their offsets
		// are shifted by what the replacements changed.
		data = slices.Concat(data[:v.start+shift], []byte("null"), data[v.end+shift:])
		shift += 4 - (v.end - v.start)
	}
	for _, n := range s.nulls {
		if problem := oldNullProblem(t, n.steps); problem != "" {
			out = append(out, &oldLocated{offset: n.start, err: Invalid(n.path, problem)})
		}
	}
	// A number in an interface or a raw message must fit a float64, as
	// encoding/json would store it; the decoder does not look inside raw
	// messages.
	for _, n := range s.numbers {
		if target := oldTypeAt(t, n.steps); target != nil && oldTakesAny(target) {
			if problem := refCheckNumber(string(s.data[n.start:n.end]), anyType); problem != "" {
				out = append(out, &oldLocated{offset: n.start, err: Invalid(n.path, problem)})
			}
		}
	}
	return out
}

// unknown locates an unknown-field error by its path, and finds the
// oldMember name of root's type it may have meant.
func (s *oldScanned) unknown(root reflect.Type, e error) *oldLocated {
	var fe sigsjson.FieldError
	if errors.As(e, &fe) {
		if m, ok := s.members[fe.FieldPath()]; ok {
			l := &oldLocated{offset: m.offset, err: Invalid(m.path, "unknown field")}
			if steps := oldParsePath(m.path); len(steps) > 0 && steps[len(steps)-1].index < 0 {
				l.suggest = oldNearestMember(root, steps[:len(steps)-1], steps[len(steps)-1].name)
			}
			return l
		}
	}
	return &oldLocated{offset: 0, err: Invalid("", "unknown field")}
}

// other locates a refusal the decoder gives without a position: an
// Unmarshaler's (time.Time, a base64 []byte, a ",string" field; command
// files use none of them). The culprit is the first oldValue whose blanking
// (null of the same length) makes the refusal go away. Its message quotes
// values, so only its kind is kept.
func (s *oldScanned) other(t reflect.Type, err error) (*oldLocated, oldValue) {
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
			return &oldLocated{offset: v.start, err: Invalid(v.path, oldOtherProblem(err, t, v, s.data[v.start]))}, v
		}
	}
	return &oldLocated{offset: int64(len(s.data)), err: Invalid("", "invalid value")}, oldValue{}
}

// oldOtherProblem names the kind of an Unmarshaler's refusal of v.
func oldOtherProblem(err error, root reflect.Type, v oldValue, first byte) string {
	var b64 base64.CorruptInputError
	switch msg := err.Error(); {
	case errors.As(err, &b64):
		return "want base64 string"
	case strings.Contains(msg, ",string struct tag") && first != '"':
		return "want string, got " + rawKind([]byte{first})
	case strings.Contains(msg, ",string struct tag"):
		if target := oldTypeAtPath(root, v.path); target != nil {
			return "want string holding a JSON " + refWantKind(target)
		}
	}
	return "invalid value"
}

// valueAt is the oldValue a type error is about: the object or array that
// starts just before its offset, or the literal that ends at it (or one
// byte before it, when the decoder has read the separator that follows).
func (s *oldScanned) valueAt(te *json.UnmarshalTypeError) oldValue {
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
		return oldValue{}
	}
	return s.values[best]
}

// oldTypeProblem says what is wrong with the oldValue a type error is about.
func oldTypeProblem(te *json.UnmarshalTypeError, root reflect.Type, v oldValue) string {
	if lit, ok := strings.CutPrefix(te.Value, "number "); ok {
		// A number that does not fit: out of range, a fraction or a sign.
		if target := oldTypeAtPath(root, v.path); target != nil && target.Kind() == reflect.Interface {
			return refCheckNumber(lit, target)
		}
		if problem := refCheckNumber(lit, te.Type); problem != "" && problem != "wrong-type" {
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
	want := refWantKind(te.Type)
	if want == "" {
		return "unsupported field type"
	}
	return "want " + want + ", got " + got
}

// oldNullProblem says why t does not take null at steps, or "" when it does:
// a pointer or an interface takes null (absent), and so does a type whose
// UnmarshalJSON accepts it (json.RawMessage).
func oldNullProblem(t reflect.Type, steps []oldStep) string {
	target := oldTypeAt(t, steps)
	switch {
	case target == nil, target.Kind() == reflect.Pointer, target.Kind() == reflect.Interface:
		return "" // no such field (reported as unknown), or absent
	case oldQuotedAt(t, steps):
		return "want string, got null"
	case target.Implements(jsonUnmarshalerType) || reflect.PointerTo(target).Implements(jsonUnmarshalerType):
		if reflect.New(target).Interface().(json.Unmarshaler).UnmarshalJSON([]byte("null")) == nil {
			return ""
		}
		return "invalid value"
	}
	if want := refWantKind(target); want != "" {
		return "want " + want + ", got null"
	}
	return "unsupported field type"
}

// oldTypeAt is the Go type the oldValue at steps decodes into, or nil when steps
// leads to no field. Under an interface, a raw message or another
// Unmarshaler, every oldValue takes anything: the result is any.
func oldTypeAt(t reflect.Type, steps []oldStep) reflect.Type {
	for _, st := range steps {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() == reflect.Interface || t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
			return anyType
		}
		switch {
		case t.Kind() == reflect.Struct && st.index < 0:
			f, ok := refJSONFields(t)[st.name]
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

// oldTypeAtPath is oldTypeAt for a oldValue's path, found among the oldScanned nulls'
// and values' steps; it is only asked about numbers in interfaces, whose
// path is plain.
func oldTypeAtPath(root reflect.Type, path string) reflect.Type {
	return oldTypeAt(root, oldParsePath(path))
}

// oldParsePath splits a path made by joinField and array indices back into
// steps.
func oldParsePath(path string) []oldStep {
	var steps []oldStep
	for path != "" {
		switch {
		case strings.HasPrefix(path, "[\""):
			end := strings.Index(path, "\"]")
			name, err := strconv.Unquote(path[1 : end+1])
			if end < 0 || err != nil {
				return steps
			}
			steps = append(steps, oldStep{name: name, index: -1})
			path = path[end+2:]
		case strings.HasPrefix(path, "["):
			end := strings.IndexByte(path, ']')
			i, err := strconv.Atoi(path[1:max(end, 1)])
			if end < 0 || err != nil {
				return steps
			}
			steps = append(steps, oldStep{index: i})
			path = path[end+1:]
		default:
			path = strings.TrimPrefix(path, ".")
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			steps = append(steps, oldStep{name: path[:end], index: -1})
			path = path[end:]
		}
	}
	return steps
}

// oldTakesAny reports whether t (a pointer to it) is an interface or an
// Unmarshaler, whose oldValue is checked as encoding/json would decode it
// into an interface.
func oldTakesAny(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Interface || t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType)
}

// oldQuotedAt reports whether the oldMember at steps is a field tagged ",string"
// of a type the option applies to (a string, number or boolean).
func oldQuotedAt(t reflect.Type, steps []oldStep) bool {
	if len(steps) == 0 || steps[len(steps)-1].index >= 0 {
		return false
	}
	parent := oldTypeAt(t, steps[:len(steps)-1])
	for parent != nil && parent.Kind() == reflect.Pointer {
		parent = parent.Elem()
	}
	if parent == nil || parent.Kind() != reflect.Struct {
		return false
	}
	return quotedFields(parent)[steps[len(steps)-1].name]
}

// The rewrite decides as the decoder it replaced did, on the fuzz corpora
// and the hostile inputs, for every agreement target: the same value, or
// the same refusal (field, problem, line, column and suggestion); and
// Locate finds the same place for every path in the document, and for
// absent members under each.
func TestRewriteAgreesWithOldDecoder(t *testing.T) {
	t.Parallel()
	inputs := readCorpus(t, filepath.Join("testdata", "fuzz", "FuzzDecodeStrict"))
	for _, dir := range []string{"testdata/fuzz/FuzzDecodersAgree", "../credentials/testdata/fuzz/FuzzDecode", "../retire/testdata/fuzz/FuzzDecode"} {
		inputs = append(inputs, readCorpus(t, dir)...)
	}
	for _, in := range hostileInputs {
		inputs = append(inputs, []byte(in))
	}
	inputs = append(inputs, []byte(doc(`{"keyId":"`+strings.Repeat("a", MaxSize)+`"}`)),
		[]byte("{\n  \"spec\": {\n    \"kyeId\": \"k1\"\n  }\n}"), []byte("{\"spec\":\n  {\"keyId\": \"k1\",}}"), []byte("{}\n\n  x"))
	refused := 0
	for _, data := range inputs {
		if rewriteAgrees(t, data) {
			refused++
		}
	}
	require.Greater(t, refused, len(inputs)/2, "most inputs are refused by some target")
}

// FuzzRewriteAgreesWithOldDecoder looks for an input on which the rewrite
// and the decoder it replaced part.
func FuzzRewriteAgreesWithOldDecoder(f *testing.F) {
	for _, in := range hostileInputs {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) { rewriteAgrees(t, data) })
}

// rewriteAgrees requires both decoders and both Locates to agree on data;
// it reports whether some target refused it.
func rewriteAgrees(t *testing.T, data []byte) bool {
	t.Helper()
	refused := false
	for name, target := range agreeTargets() {
		gotNew, gotOld := target(), target()
		errNew, errOld := DecodeStrict(data, gotNew), oldDecodeStrict(data, gotOld)
		if errOld == nil {
			require.NoError(t, errNew, "%s %q", name, data)
			require.Equal(t, gotOld, gotNew, "%s %q", name, data)
			continue
		}
		refused = true
		require.Error(t, errNew, "%s %q: the old decoder refuses with %v", name, data, errOld)
		var leOld, leNew *LocatedError
		if !errors.As(errOld, &leOld) || !strings.HasSuffix(leOld.Field, `"]`) {
			require.Equal(t, errOld.Error(), errNew.Error(), "%s %q", name, data)
			continue
		}
		// A quoted member name: the old decoder parsed it back out of the
		// path, and a name holding "] could make it suggest the parent's
		// name (spec["]"] → spec). The rewrite keeps the name it read.
		require.ErrorAs(t, errNew, &leNew, "%s %q", name, data)
		require.Equal(t, *leOld.InvalidError, *leNew.InvalidError, "%s %q", name, data)
		require.Equal(t, [2]int{leOld.Line, leOld.Column}, [2]int{leNew.Line, leNew.Column}, "%s %q", name, data)
	}
	fields := []string{"", "nope", "spec.nope[3]"}
	if len(data) <= MaxSize {
		for _, v := range oldScan(data).values {
			fields = append(fields, v.path, v.path+".nope", v.path+"[9]")
		}
	}
	for _, field := range fields {
		if strings.Contains(field, `"]`) && oldPathOf(oldParsePath(field)) != field {
			continue // the old Locate could not parse such a name back either
		}
		line, column, ok := Locate(data, field)
		oldLine, oldColumn, oldOK := oldLocate(data, field)
		require.Equal(t, []any{oldLine, oldColumn, oldOK}, []any{line, column, ok}, "%q %q", data, field)
	}
	return refused
}

// BenchmarkDecode decodes a command document of about 4 KiB and one near
// MaxSize with the rewrite, the decoder it replaced and the walker before
// that (go test -bench Decode -run '^$').
func BenchmarkDecode(b *testing.B) {
	secret := `{"name":"app-tls","keys":[{"name":"k1","version":1},{"name":"k2","version":2}],"data":{"tls.crt":"v","tls.key":"w"}}`
	for _, n := range []int{30, 450} {
		data := []byte(doc(`{"keyId":"k1","count":3,"extra":{"a":[1,2,{"b":"c"}]},"secrets":[` +
			strings.TrimSuffix(strings.Repeat(secret+",", n), ",") + `]}`))
		require.LessOrEqual(b, len(data), MaxSize)
		for name, decode := range map[string]func([]byte, any) error{"new": DecodeStrict, "old": oldDecodeStrict, "walker": walkDecodeStrict} {
			b.Run(fmt.Sprintf("%dB/%s", len(data), name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := decode(data, new(testDoc)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
