package command

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds object and array nesting; command files are shallow.
const maxDepth = 32

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

// scanner reads a document's tokens for scan.
type scanner struct {
	*scanned
	dec  *json.Decoder
	data []byte
}

// scan reads the tokens of data, as the walk of a type will take them,
// and notes the first problem that needs no type: a syntax error, a
// top level that is no object, a bad string, a duplicate member, excess
// depth, data after the object.
func scan(data []byte) *scanned {
	sc := &scanner{scanned: &scanned{}, dec: json.NewDecoder(bytes.NewReader(data)), data: data}
	sc.dec.UseNumber()
	tok, ok := sc.next("", kindValue)
	switch {
	case !ok:
	case tok != json.Delim('{'):
		sc.note(0, rankType, 0, Invalid("", "want object, got "+tokenKind(tok)))
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

// hex4 is the value of four hex digits, or -1.
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
