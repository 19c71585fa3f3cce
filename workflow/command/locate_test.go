package command

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// A refusal says where it is: the line and column of the member or value
// (columns count characters), and for an unknown member the member of the
// same object that was probably meant. It still never holds a value.
func TestRefusalsAreLocated(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, input        string
		field, problem     string
		line, column       int
		suggestion, inText string
	}{
		{name: "misspelled member", input: "{\n  \"spec\": {\n    \"kyeId\": \"k1\"\n  }\n}",
			field: "spec.kyeId", problem: "unknown field", line: 3, column: 5, suggestion: "keyId",
			inText: "command file: spec.kyeId: unknown field (line 3, column 5); did you mean keyId?"},
		{name: "case only", input: `{"spec":{"keyID":"k1"}}`, field: "spec.keyID", line: 1, column: 10, suggestion: "keyId"},
		{name: "nothing near", input: `{"spec":{"zzzzzzzz":1}}`, field: "spec.zzzzzzzz", line: 1, column: 10},
		{name: "nested member", input: "{\"spec\":{\"secrets\":[\n{\"name\":\"a\",\"kyes\":[]}]}}", field: "spec.secrets[0].kyes",
			line: 2, column: 13, suggestion: "keys"},
		{name: "characters, not bytes", input: "{\"spec\":{\"keyId\":\"äöü\",\n \"count\":\"x\"}}", field: "spec.count",
			problem: "want non-negative integer, got string", line: 2, column: 10},
		{name: "wrong type", input: "{\"metadata\":\n  {\"requestId\": 7}}", field: "metadata.requestId", line: 2, column: 17},
		{name: "syntax error", input: "{\"spec\":\n  {\"keyId\": \"k1\",}}", field: "spec", problem: "invalid JSON", line: 2, column: 18},
		{name: "end of input", input: "{\"kind\":\n\"Key", field: "kind", problem: "unexpected end of input", line: 2, column: 5},
		{name: "trailing data", input: "{}\n\n  x", problem: "data after the top-level object", line: 3, column: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := DecodeStrict([]byte(tc.input), new(testDoc))
			var le *LocatedError
			require.True(t, errors.As(err, &le), "%v", err)
			require.Equal(t, tc.field, le.Field)
			if tc.problem != "" {
				require.Equal(t, tc.problem, le.Problem)
			}
			require.Equal(t, []int{tc.line, tc.column}, []int{le.Line, le.Column}, "%v", err)
			require.Equal(t, tc.suggestion, le.Suggestion)
			if tc.inText != "" {
				require.Equal(t, tc.inText, err.Error())
			}
			var ie *InvalidError
			require.ErrorAs(t, err, &ie, "an InvalidError, as before")
			require.ErrorIs(t, err, &InvalidError{Field: tc.field})
		})
	}
}

// Locate finds a member's value, or the nearest enclosing value present.
func TestLocate(t *testing.T) {
	t.Parallel()
	data := []byte("{\n  \"spec\": {\n    \"secrets\": [{\"name\": \"a\"}]\n  }\n}")
	for field, want := range map[string][2]int{
		"spec.secrets[0].name": {3, 26},
		"spec.secrets[0].keys": {3, 17},
		"spec.keyId":           {2, 11},
		"spec":                 {2, 11},
	} {
		line, column, ok := Locate(data, field)
		require.True(t, ok, field)
		require.Equal(t, want, [2]int{line, column}, field)
	}
	_, _, ok := Locate([]byte(`[`), "spec")
	require.False(t, ok)
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		d    int
	}{{"secretname", "secertname", 1}, {"keyid", "keyid", 0}, {"keys", "kyes", 1}, {"abc", "", 3}, {"kitten", "sitting", 3}} {
		require.Equal(t, c.d, editDistance(c.a, c.b), "%s %s", c.a, c.b)
	}
}
