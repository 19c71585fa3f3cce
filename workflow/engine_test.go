package workflow

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
)

// The fsm's events allow exactly the journal's edges: the engine can never
// attempt a move the database would refuse, nor miss one it allows.
func TestEventsAreTheJournalEdges(t *testing.T) {
	t.Parallel()
	var fromEvents []store.Edge
	for _, ev := range Events() {
		for _, src := range ev.Src {
			fromEvents = append(fromEvents, store.Edge{From: store.State(src), To: store.State(ev.Dst)})
		}
	}
	require.ElementsMatch(t, store.Edges(), fromEvents)
	for _, e := range store.Edges() {
		require.False(t, e.From.Terminal(), "no edge leaves a terminal state: %v", e)
	}
}
