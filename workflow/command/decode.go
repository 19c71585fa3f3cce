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
// a programming error, returned as a plain error. A scan reads the tokens
// once and checks what needs no type (the syntax, the depth, the text of
// every string, duplicates); a walk of those tokens along v's type checks
// every member and value. Kubernetes' strict decoding (sigs.k8s.io/json, as
// for kubectl's manifests) then has the last word on fields and types.
// When a document has several problems the first in the document is
// reported. The value stored in v is encoding/json's (numbers in interface
// values are float64), so digests are unchanged.
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
	if err := supported(rv.Type().Elem()); err != nil {
		return err
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

// A problem is a refusal, the token where it is found and, among the
// problems of one token, its rank: the first of the document is reported.
type problem struct {
	index, rank int
	at          int64 // where it is shown
	err         *InvalidError
	suggest     string // for an unknown member: the name probably meant
}

const (
	rankText   = iota // the token itself: syntax, UTF-8, surrogates
	rankRepeat        // a duplicate member name
	rankType          // the token against the type (the top level: an object)
	rankDepth         // the object or array it opens is too deep
)

func (p *problem) before(q *problem) bool {
	return p.index < q.index || p.index == q.index && p.rank < q.rank
}

// checker walks the scanned tokens along a Go type: each member name is
// looked up and each value checked against the type encoding/json would
// decode it into, and the first problem is returned.
type checker struct {
	toks []token
	data []byte
	i    int  // the next token
	out  bool // the tokens ended (a syntax error) inside the value
}

// fail is a problem with token k against the type.
func (c *checker) fail(k int, what string) *problem {
	return &problem{index: k, rank: rankType, at: c.toks[k].start, err: Invalid(c.toks[k].path, what)}
}

// take is the index of the next token, or false at the end of the tokens.
func (c *checker) take() (int, bool) {
	c.i++
	c.out = c.i > len(c.toks)
	return c.i - 1, !c.out
}

// value checks the value that begins at the next token against t; a
// json.RawMessage takes any value, as an interface does.
func (c *checker) value(t reflect.Type) *problem {
	k, ok := c.take()
	if !ok {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		if c.toks[k].tok == nil {
			return nil
		}
		t = t.Elem()
	}
	if t == rawType {
		t = anyType
	}
	isAny := t.Kind() == reflect.Interface
	switch tok := c.toks[k].tok.(type) {
	case nil:
		if isAny {
			return nil
		}
	case json.Delim:
		switch {
		case tok == '{' && (t.Kind() == reflect.Struct || t.Kind() == reflect.Map):
			return c.object(t)
		case tok == '{' && isAny:
			return c.object(anyObject)
		case tok == '[' && t.Kind() == reflect.Slice:
			return c.array(t)
		case tok == '[' && isAny:
			return c.array(anyArray)
		}
	case string:
		if t.Kind() == reflect.String || isAny {
			return nil
		}
	case json.Number:
		if isNumber(t) || isAny {
			if problem := numberProblem(string(tok), t); problem != "" {
				return c.fail(k, problem)
			}
			return nil
		}
	case bool:
		if t.Kind() == reflect.Bool || isAny {
			return nil
		}
	}
	return c.fail(k, "want "+wantKind(t)+", got "+tokenKind(c.toks[k].tok))
}

// object checks the members of an object (its '{' read) against t, a
// struct or a map.
func (c *checker) object(t reflect.Type) *problem {
	for c.i < len(c.toks) && c.toks[c.i].kind == kindName {
		n, _ := c.take()
		name := c.toks[n].tok.(string)
		var ft reflect.Type
		if t.Kind() == reflect.Map {
			ft = t.Elem()
		} else if ft = fields(t)[name]; ft == nil {
			p := c.fail(n, "unknown field")
			p.suggest = nearestMember(t, name)
			return p
		}
		if p := c.value(ft); p != nil || c.out {
			return p
		}
	}
	return c.close()
}

// array checks the elements of an array (its '[' read) against t, a slice.
func (c *checker) array(t reflect.Type) *problem {
	for c.i < len(c.toks) && c.toks[c.i].kind != kindClose {
		if p := c.value(t.Elem()); p != nil || c.out {
			return p
		}
	}
	return c.close()
}

// close reads the closing delimiter.
func (c *checker) close() *problem {
	c.take()
	return nil
}
