package integration

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// journal list as a namespace role reads its granted namespaces' newest
// operations, not the whole journal: where another namespace holds 20,000
// operations, the role's page is exactly its own operations, newest first
// (as the owner's list orders them), and the statement touches a few dozen
// buffers, where filtering the newest of everyone's through row-level
// security walked all 20,000 (about 500 buffers).
func TestIntegrationJournalListReadsGrantedNamespaces(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := e.RetentionJournal()
	ctx := t.Context()
	_, err := j.OwnerConn.Exec(ctx, `
		INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name)
		SELECT 'ToyClaim', 'busy-' || g, 'req', 'sha256:' || repeat('0', 64), 'busy', 'name-' || (g % 300)
		FROM generate_series(1, 20000) g`)
	require.NoError(t, err)
	var mine []string
	for i := range 5 {
		op := oneShot(t, j.Role, "mine-"+string(rune('a'+i)))
		mine = append([]string{op.MutationID}, mine...) // newest first
	}
	_, err = j.OwnerConn.Exec(ctx, `ANALYZE keyledger.operations`)
	require.NoError(t, err)

	ids := func(ops []*store.Operation) []string {
		out := make([]string, len(ops))
		for i, op := range ops {
			out[i] = op.MutationID
		}
		return out
	}
	ops, err := j.Role.List(ctx, store.ListParams{Limit: 50})
	require.NoError(t, err)
	require.Equal(t, mine, ids(ops), "the role's page: its own operations, newest first")
	ops, err = j.Role.List(ctx, store.ListParams{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, mine[:2], ids(ops))
	ops, err = j.Owner.List(ctx, store.ListParams{Limit: 7})
	require.NoError(t, err)
	require.Equal(t, mine, ids(ops)[:5], "the owner's page: everyone's, newest first")
	require.Len(t, ops, 7)
	all, err := j.Owner.List(ctx, store.ListParams{Limit: 30000})
	require.NoError(t, err)
	require.Len(t, all, 20005)

	// Twice: the session's first statement also reads the catalog.
	text := suite.ExplainText(t, j.RoleConn, store.ReaderSQL()["list"], 50)
	var plan []map[string]any
	require.NoError(t, j.RoleConn.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+store.ReaderSQL()["list"], 50).Scan(&plan))
	top := plan[0]["Plan"].(map[string]any)
	buffers := top["Shared Hit Blocks"].(float64) + top["Shared Read Blocks"].(float64)
	t.Logf("journal list as the role: %.0f buffers\n%s", buffers, text)
	require.Less(t, buffers, 200.0, "journal list as a namespace role reads its own namespaces' operations, not the others'")
}
