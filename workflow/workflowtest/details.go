package workflowtest

import (
	"bufio"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/keyledger/keyledger/store"
)

// A DetailType reads a record's detail into a family's typed record and
// writes it back (Via).
type DetailType func(store.Detail) (store.Detail, error)

// Via is the DetailType of the record type T: decode into T, encode T.
func Via[T any]() DetailType {
	return func(d store.Detail) (store.Detail, error) {
		v, err := store.DecodeDetail[T](d)
		if err != nil {
			return store.Detail{}, err
		}
		return store.NewDetail(v)
	}
}

// Both is the DetailType of a detail written by two types at once (the
// engine adds its own fields, workflow.AnswerCode or
// workflow.KeptResolution, to a family's answer or verdict detail).
func Both(a, b DetailType) DetailType {
	return func(d store.Detail) (store.Detail, error) {
		x, err := a(d)
		if err != nil {
			return store.Detail{}, err
		}
		y, err := b(d)
		if err != nil {
			return store.Detail{}, err
		}
		return store.Merge(x, y), nil
	}
}

// EngineSummary is what the engine may add to a refusal's summary, each
// part there or not: a refused batch's targets and the call the authority
// rejected, or the step, target and attempts of an attempt limit.
type EngineSummary struct {
	Applied    *[]string        `json:"applied,omitempty"`
	Kept       *[]string        `json:"kept,omitempty"`
	NotApplied *[]string        `json:"notApplied,omitempty"`
	Rejected   *string          `json:"rejected,omitempty"`
	Code       *json.RawMessage `json:"code,omitempty"`
	Step       *string          `json:"step,omitempty"`
	Target     *string          `json:"target,omitempty"`
	Attempts   *int             `json:"attempts,omitempty"`
}

// Refusal is the DetailType of a refusal's summary: the family's (t) with
// what the engine may add.
func Refusal(t DetailType) DetailType { return Both(Via[EngineSummary](), t) }

// FixtureRecord is one line of a journal-details fixture: a record's kind,
// step, target, status and reason and its detail as the journal held it.
type FixtureRecord struct {
	Kind   store.RecordKind `json:"kind"`
	Step   string           `json:"step"`
	Target string           `json:"target"`
	Status store.Status     `json:"status"`
	Reason store.Reason     `json:"reason"`
	Detail json.RawMessage  `json:"detail"`
}

// RequireDetailsRoundTrip reads the fixture at path (one FixtureRecord a
// line, as an earlier version of the code journaled them) and requires
// that each record's detail decodes into the record type typeOf names for
// it and encodes back to the same canonical JSON, byte for byte: a journal
// written before the records were typed still reads, and what the types
// write is what was written before. typeOf returns nil for a record the
// fixture holds but no type claims (a test family's, not the family's);
// those are listed as failures unless skip says so.
func RequireDetailsRoundTrip(t testing.TB, path string, typeOf func(FixtureRecord) DetailType) {
	t.Helper()
	f, err := os.Open(path) //nolint:gosec // G304: a test fixture path
	if err != nil {
		t.Fatalf("opening fixture: %v", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	n := 0
	for sc.Scan() {
		n++
		var rec FixtureRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		want, err := store.ParseDetail(rec.Detail)
		if err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		via := typeOf(rec)
		if via == nil {
			t.Errorf("%s:%d: no record type for %s %s %s", path, n, rec.Kind, rec.Step, rec.Target)
			continue
		}
		got, err := via(want)
		if err != nil {
			t.Errorf("%s:%d: %s %s: %v", path, n, rec.Kind, rec.Step, err)
			continue
		}
		if want.IsZero() {
			continue // journaled without detail (an absent read, a record a test built): it decodes, and that is all
		}
		if got != want {
			t.Errorf("%s:%d: %s %s does not round-trip:\n journaled %s\n typed     %s", path, n, rec.Kind, rec.Step, want, got)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading fixture: %v", err)
	}
	if n == 0 {
		t.Fatalf("fixture %s holds no record", path)
	}
}

// Untyped lists the places in the types of vs (values or pointers, walked
// through struct fields, pointers, slices, arrays, maps and funcs'
// parameters and results) where a payload is untyped: an empty interface
// (any) or a map with one as its element, e.g. map[string]any. An error
// (a non-empty interface) is typed; store.Detail is a typed record's JSON.
func Untyped(vs ...any) []string {
	var out []string
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		if seen[t] {
			return
		}
		switch t.Kind() {
		case reflect.Interface:
			if t.NumMethod() == 0 {
				out = append(out, path+" is "+t.String())
			}
			return
		case reflect.Map:
			if t.Elem().Kind() == reflect.Interface && t.Elem().NumMethod() == 0 {
				out = append(out, path+" is "+t.String())
				return
			}
			walk(t.Key(), path+"[key]")
			walk(t.Elem(), path+"[]")
			return
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(t.Elem(), path)
			return
		case reflect.Func:
			for i := range t.NumIn() {
				walk(t.In(i), path+"(in)")
			}
			for i := range t.NumOut() {
				walk(t.Out(i), path+"(out)")
			}
			return
		case reflect.Struct:
		default:
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			name := t.Name()
			if name == "" {
				name = "struct"
			}
			if pkg := t.PkgPath(); pkg != "" {
				name = pkg[strings.LastIndex(pkg, "/")+1:] + "." + name
			}
			walk(f.Type, name+"."+f.Name)
		}
	}
	for _, v := range vs {
		t := reflect.TypeOf(v)
		walk(t, t.String())
	}
	return out
}

// Fields is d as generic JSON, the way tests written before records were
// typed compare details (numbers as float64, as jsonb reads back). Test
// code only: a family decodes its own record types (store.DecodeDetail).
func Fields(d store.Detail) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(d.JSON(), &m); err != nil {
		panic("workflowtest.Fields: a detail is a JSON object: " + err.Error())
	}
	return m
}
