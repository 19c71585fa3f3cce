package command

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds object and array nesting; command files are shallow.
const maxDepth = 32

// A problem is the first refusal found in a document, where it is shown,
// and for an unknown member the name probably meant.
type problem struct {
	at      int64
	err     *InvalidError
	suggest string
}

// spot is where a value begins, and its JSON path.
type spot struct {
	path  string
	start int64
}

// scanner reads a document's tokens once, in order, and checks each as it
// comes: its text (syntax, UTF-8, surrogates), a member name against the
// names before it and the type's, a value against the type encoding/json
// decodes it into, the depth. The first problem counts; the scan goes on
// after it (along no type) so that Locate sees every value.
type scanner struct {
	dec    *json.Decoder
	data   []byte
	first  *problem
	spots  []spot // with locate: every value read
	locate bool
}

// scan checks data, a document, along t (anyType: no type) and returns the
// scanner with the first problem, if any.
func scan(data []byte, t reflect.Type, locate bool) *scanner {
	sc := &scanner{dec: json.NewDecoder(bytes.NewReader(data)), data: data, locate: locate}
	sc.dec.UseNumber()
	tok, start, ok := sc.next("", false)
	switch {
	case !ok:
	case tok != json.Delim('{'):
		sc.note(0, "", "want object, got "+tokenKind(tok))
	case sc.value(tok, start, "", 1, t):
		end := sc.dec.InputOffset()
		if _, err := sc.dec.Token(); err != io.EOF {
			rest := data[end:]
			sc.note(end+int64(len(rest)-len(bytes.TrimLeft(rest, " \t\r\n"))), "", "data after the top-level object")
		} else if !utf8.Valid(data) {
			sc.note(int64(len(data)), "", "invalid UTF-8")
		}
	}
	return sc
}

// note records a problem at offset at unless one came before; it reports
// whether it did.
func (sc *scanner) note(at int64, path, what string) bool {
	if sc.first != nil {
		return false
	}
	sc.first = &problem{at: at, err: Invalid(path, what)}
	return true
}

// next reads one token, at path, and checks the text of a string (a
// member name when name is set) on its raw bytes, which the decoder
// would mend; false at a syntax error.
func (sc *scanner) next(path string, name bool) (json.Token, int64, bool) {
	pre := sc.dec.InputOffset()
	tok, err := sc.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			sc.note(int64(len(sc.data)), path, "unexpected end of input")
		case errors.As(err, &se): // the location says where
			sc.note(se.Offset, path, "invalid JSON")
		default:
			sc.note(pre, path, "invalid JSON")
		}
		return nil, 0, false
	}
	end := sc.dec.InputOffset()
	start := end - int64(len(bytes.TrimLeft(sc.data[pre:end], " \t\r\n,:")))
	if _, ok := tok.(string); ok {
		if problem := checkLiteral(sc.data[start:end]); problem != "" && name {
			sc.note(pre, path, problem+" in member name")
		} else if problem != "" {
			sc.note(pre, path, problem)
		}
	}
	return tok, start, true
}

// value scans the value that begins with tok, at start, against t, at
// nesting depth (the top-level object's is 1); false at a syntax error.
func (sc *scanner) value(tok json.Token, start int64, path string, depth int, t reflect.Type) bool {
	if sc.locate {
		sc.spots = append(sc.spots, spot{path, start})
	}
	for t.Kind() == reflect.Pointer && tok != nil {
		t = t.Elem()
	}
	if t == rawType { // it takes any value, as an interface does
		t = anyType
	}
	if problem := fits(tok, t); problem != "" {
		sc.note(start, path, problem)
		t = anyType
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return true
	}
	if depth > maxDepth {
		sc.note(start, path, fmt.Sprintf("nested deeper than %d", maxDepth))
	}
	seen := map[string]bool{}
	for i := 0; sc.dec.More(); i++ {
		var vpath string
		var vt reflect.Type
		if delim == '[' {
			vpath, vt = path+"["+strconv.Itoa(i)+"]", member(t, "")
		} else {
			tok, nstart, ok := sc.next(path, true)
			if !ok {
				return false
			}
			name := tok.(string)
			vpath, vt = joinField(path, name), member(t, name)
			if seen[name] {
				sc.note(nstart, vpath, "duplicate member")
			}
			seen[name] = true
			if vt == nil && sc.note(nstart, vpath, "unknown field") {
				sc.first.suggest = nearestMember(t, name)
			}
			if vt == nil {
				vt = anyType
			}
		}
		if tok, vstart, ok := sc.next(vpath, false); !ok || !sc.value(tok, vstart, vpath, depth+1, vt) {
			return false
		}
	}
	_, _, ok = sc.next(path, false)
	return ok
}

// escape matches one escape in a JSON string literal: a surrogate pair,
// a lone surrogate (the group), or any other.
var escape = regexp.MustCompile(`\\(?:u[dD][89abAB][[:xdigit:]]{2}\\u[dD][c-fC-F][[:xdigit:]]{2}|(u[dD][89a-fA-F][[:xdigit:]]{2})|.)`)

// checkLiteral checks the raw bytes of a JSON string literal for invalid
// UTF-8 and unpaired surrogate escapes, which the decoder would mend.
func checkLiteral(lit []byte) string {
	if !utf8.Valid(lit) {
		return "invalid UTF-8"
	}
	if bytes.IndexByte(lit, '\\') < 0 {
		return ""
	}
	for _, m := range escape.FindAllSubmatchIndex(lit, -1) {
		if m[2] >= 0 {
			return "unpaired UTF-16 surrogate escape"
		}
	}
	return ""
}
