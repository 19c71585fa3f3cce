package store_test

import (
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/migrations"
	"github.com/keyledger/keyledger/store"
)

// The state machine is the one definition of the journal's moves: the Go
// edges are derived from it, and the SQL edges (keyledger.state_edges, as
// the migrations write them) and the diagram in workflow/README.md are
// checked against it here.
func TestStateMachineIsTheOneDefinition(t *testing.T) {
	t.Parallel()
	edges := store.Edges()
	require.NotEmpty(t, edges)
	for _, e := range edges {
		require.False(t, e.From.Terminal(), "no edge leaves a terminal state: %v", e)
		require.NotEqual(t, e.From, e.To, "a note is no edge: %v", e)
		require.NotEmpty(t, store.EdgeEvent(e), "edge %v has an event", e)
	}
	require.ElementsMatch(t, edges, sqlEdges(t), "keyledger.state_edges as the migrations write it")

	diagram := diagramEdges(t)
	want := map[store.Edge]store.Event{}
	for _, e := range edges {
		want[e] = store.EdgeEvent(e)
	}
	require.Equal(t, want, diagram, "the diagram in workflow/README.md: each edge labelled with its event")
}

// sqlEdges reads the rows the migrations insert into keyledger.state_edges;
// only migration 000001 may write them.
func sqlEdges(t *testing.T) []store.Edge {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.up.sql")
	require.NoError(t, err)
	writes := regexp.MustCompile(`(?i)(INSERT INTO|UPDATE|DELETE FROM)\s+keyledger\.state_edges`)
	for _, f := range files {
		if f == "000001_journal.up.sql" {
			continue
		}
		b, err := fs.ReadFile(migrations.FS, f)
		require.NoError(t, err)
		require.False(t, writes.Match(b), "%s writes keyledger.state_edges: only 000001 may", f)
	}
	b, err := fs.ReadFile(migrations.FS, "000001_journal.up.sql")
	require.NoError(t, err)
	insert := regexp.MustCompile(`(?s)INSERT INTO keyledger\.state_edges \(from_state, to_state\) VALUES(.*?);`).FindSubmatch(b)
	require.NotNil(t, insert, "000001 inserts the edges")
	var out []store.Edge
	for _, m := range regexp.MustCompile(`\('(\w+)',\s*'(\w+)'\)`).FindAllSubmatch(insert[1], -1) {
		out = append(out, store.Edge{From: store.State(m[1]), To: store.State(m[2])})
	}
	return out
}

// diagramEdges reads the mermaid state diagram in workflow/README.md.
func diagramEdges(t *testing.T) map[store.Edge]store.Event {
	t.Helper()
	b, err := os.ReadFile("../workflow/README.md")
	require.NoError(t, err)
	text := string(b)
	start := strings.Index(text, "stateDiagram-v2")
	require.GreaterOrEqual(t, start, 0, "workflow/README.md draws the state machine")
	end := strings.Index(text[start:], "```")
	require.Positive(t, end)
	out := map[store.Edge]store.Event{}
	line := regexp.MustCompile(`(?m)^\s*(\w+) --> (\w+): (\w+)`)
	for _, m := range line.FindAllStringSubmatch(text[start:start+end], -1) {
		e := store.Edge{From: store.State(m[1]), To: store.State(m[2])}
		require.NotContains(t, out, e, "the diagram draws %v once", e)
		out[e] = store.Event(m[3])
	}
	return out
}

// Reachable follows the edges forward only.
func TestReachable(t *testing.T) {
	t.Parallel()
	require.True(t, store.Reachable(store.StatePrepared, store.StatePrepared))
	require.True(t, store.Reachable(store.StateAnswered, store.StateResolving))
	require.True(t, store.Reachable(store.StateResolving, store.StateRefused))
	require.False(t, store.Reachable(store.StateCalling, store.StatePrepared))
	require.False(t, store.Reachable(store.StateCompleted, store.StateCalling))
}
