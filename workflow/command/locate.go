package command

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

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
	spots := scan(data, anyType, true).spots
	best := -1
	for i, sp := range spots {
		p := sp.path
		within := p == "" || p == field || strings.HasPrefix(field, p) && strings.ContainsRune(".[", rune(field[len(p)]))
		if within && (best < 0 || len(p) > len(spots[best].path)) {
			best = i
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	line, column = lineColumn(data, spots[best].start)
	return line, column, true
}

// nearestMember is the member name of struct type t closest to name: the
// same but for case, or at most two edits away (and fewer than half its
// length); "" when none is.
func nearestMember(t reflect.Type, name string) string {
	best, bestDistance := "", 3
	for known := range fields(t) {
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

// plainName: s is 1 to 64 ASCII letters, digits, '_' and '-'.
func plainName(s string) bool {
	for _, c := range []byte(s) {
		if !(c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return s != "" && len(s) <= 64
}
