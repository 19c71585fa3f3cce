package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNextRun: the one run numbering, and the preparation of run n.
func TestNextRun(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		latest *Operation
		want   int64
	}{
		{nil, 1},
		{&Operation{MutationID: "m1"}, 1}, // journaled under the command's own ID by an older keyledger: run 0
		{&Operation{MutationID: "m1:run-1"}, 2},
		{&Operation{MutationID: "m1:run-41"}, 42},
		{&Operation{MutationID: "m1:run-0x"}, 1},
	} {
		require.Equal(t, c.want, NextRun("m1", c.latest), "after %+v", c.latest)
	}
	run := RunPreparation(PrepareParams{MutationID: "m1", Detail: DetailOf(map[string]any{"run": "not this", "owner": "o"})}, 3, RunLineage{Supersedes: "sha256:a"})
	require.Equal(t, "m1:run-3", run.MutationID)
	require.JSONEq(t, `{"supersedes": "sha256:a", "owner": "o", "command": "m1", "run": 3}`, run.Detail.String())
}
