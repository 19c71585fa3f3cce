package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRunIDs(t *testing.T) {
	t.Parallel()
	require.Equal(t, "m1:run-3", RunID("m1", 3))
	for _, tc := range []struct {
		in   string
		id   string
		n    int64
		runs bool
	}{
		{"m1:run-3", "m1", 3, true},
		{"a:b:run-12", "a:b", 12, true},
		{"m1:run-9999999999", "m1", 9999999999, true},
		{"m1", "", 0, false},
		{"m1:run-", "", 0, false},
		{"m1:run-0", "", 0, false},
		{"m1:run-03", "", 0, false},
		{"m1:run-x", "", 0, false},
		{":run-1", "", 0, false},
		{"m1:run-12345678901", "", 0, false},
	} {
		id, n, ok := SplitRunID(tc.in)
		require.Equal(t, tc.runs, ok, tc.in)
		require.Equal(t, tc.id, id, tc.in)
		require.Equal(t, tc.n, n, tc.in)
	}
}
