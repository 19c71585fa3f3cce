package command

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// quotedFieldsReference is quotedAt's question answered as it was before
// quotedFields: the first visible field the member name matches decides.
func quotedFieldsReference(parent reflect.Type, name string) bool {
	for _, f := range reflect.VisibleFields(parent) {
		tagName, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tagName != name && (tagName != "" || f.Name != name) {
			continue
		}
		switch f.Type.Kind() {
		case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr, reflect.Float32, reflect.Float64:
			return slices.Contains(strings.Split(opts, ","), "string")
		}
		return false
	}
	return false
}

// quotedFields answers, for every member name, what the first matching
// field answers: tag names, Go names, a tag naming no member, names two
// fields share (the first decides), ",string" on types it applies to and
// on one it does not, embedded fields, and the empty member name.
func TestQuotedFieldsAgreesWithFirstMatch(t *testing.T) {
	type Inner struct {
		Deep  int `json:"deep,string"`
		Plain int
	}
	// A shadowed field: odd's own Name hides Shadowed's, which is not
	// among the visible fields.
	type Shadowed struct {
		Name int `json:"name,string"`
	}
	type odd struct {
		Inner
		Port  int    `json:"port,string"`
		Count int    `json:",string"`
		Name  string `json:"name"`
		Shadowed
		Flag    bool     `json:"flag,omitempty,string"`
		List    []int    `json:"list,string"` //nolint:staticcheck // ",string" where it does not apply, on purpose
		Ptr     *int     `json:"ptr,string"`
		Skipped int      `json:"-"`
		Untag   float64  `json:",omitempty"`
		Other   string   `json:"Port"`
		Multi   []string `json:"multi"`
		// Two fields answer for "Twin": the tagged one comes first, and
		// decides.
		Renamed int `json:"Twin,string"`
		Twin    int
	}
	names := []string{"", "port", "Port", "Count", "count", "name", "Name", "Shadowed", "flag", "list", "ptr", "-", "Skipped",
		"Untag", "multi", "Multi", "Twin", "Renamed", "deep", "Deep", "Plain", "Inner", "missing"}
	for _, typ := range []reflect.Type{reflect.TypeFor[odd](), reflect.TypeFor[Inner](), reflect.TypeFor[Shadowed](), reflect.TypeFor[testDoc](), reflect.TypeFor[Envelope]()} {
		for _, name := range names {
			require.Equal(t, quotedFieldsReference(typ, name), quotedFields(typ)[name], "%s: member %q", typ, name)
		}
	}
}
