package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
)

func TestJournalListGroupsRuns(t *testing.T) {
	t.Parallel()
	ops := []*store.Operation{{MutationID: "p:run-3"}, {MutationID: "other"}, {MutationID: "p:run-2"}, {MutationID: "q:run-1"}, {MutationID: "p:run-1"}}
	var got []string
	for _, op := range groupRuns(ops) {
		got = append(got, op.MutationID)
	}
	require.Equal(t, []string{"p:run-3", "p:run-2", "p:run-1", "other", "q:run-1"}, got)
}
