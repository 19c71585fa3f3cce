package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// stepRecordsQueryBefore10 is the versioned family's provenance read as it
// was before migration 10: every operation on the Secret
// (operations_target), then each one's create-snapshot records
// (records_operation_step). The bound test shows its cost grows with the
// Secret's history, so that the test's measure tells the two apart.
const stepRecordsQueryBefore10 = `
		SELECT operation_id, id
		FROM keyledger.records r
		WHERE r.operation_id IN (SELECT o.id FROM keyledger.operations o WHERE o.target_namespace = $1 AND o.target_name = $2)
		  AND r.step = $3
		  AND EXISTS (SELECT 1 FROM keyledger.records c
		              WHERE c.operation_id = r.operation_id AND c.kind = 'authority_call' AND c.step = $3 AND c.uid = $4)
		ORDER BY operation_id, id`

// planCost is what one EXPLAIN (ANALYZE, BUFFERS) of a query touched: the
// rows every plan node produced (each loop counted) and the shared buffers
// of the whole plan. Both are deterministic for a given journal, unlike
// time.
type planCost struct {
	rows    int64
	buffers int64
}

func explainCost(t *testing.T, conn *pgx.Conn, query string, args ...any) planCost {
	t.Helper()
	// The session's first look at the catalog is not the query's.
	_, err := conn.Exec(t.Context(), "EXPLAIN (ANALYZE) "+query, args...)
	require.NoError(t, err)
	var raw []byte
	require.NoError(t, conn.QueryRow(t.Context(), "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) "+query, args...).Scan(&raw))
	var plans []struct {
		Plan json.RawMessage `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(raw, &plans))
	require.Len(t, plans, 1)
	type node struct {
		Rows    float64 `json:"Actual Rows"`
		Loops   float64 `json:"Actual Loops"`
		Hit     int64   `json:"Shared Hit Blocks"`
		Read    int64   `json:"Shared Read Blocks"`
		Plans   []json.RawMessage
		Subplan string `json:"Subplan Name"`
	}
	var c planCost
	var walk func(json.RawMessage, bool)
	walk = func(m json.RawMessage, top bool) {
		var n node
		require.NoError(t, json.Unmarshal(m, &n))
		c.rows += int64(n.Rows*n.Loops + 0.5)
		if top {
			c.buffers = n.Hit + n.Read // a node's buffers include its children's
		}
		for _, p := range n.Plans {
			walk(p, false)
		}
	}
	walk(plans[0].Plan, true)
	return c
}

// A versioned write's provenance read costs what the listed snapshots'
// records cost, whatever the Secret's history: in one journal, as the
// namespace role (row-level security applies), a Secret with 40 past
// updates and one with 1200 (a daily update for more than three years)
// read the same rows and the same buffers for the same number of listed
// snapshots (the retention limit plus one), and get exactly their
// records. The read of migration 9 touched rows in proportion to the
// history: the same measure shows it grow, so the test tells them apart.
func TestIntegrationHistoryProvenanceBounded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := e.RetentionJournal()
	ctx := t.Context()
	const short, long, listed = 40, 1200, 4
	type secret struct {
		name  string
		uid   types.UID
		slot  string
		ops   int
		names []string
	}
	secrets := []*secret{{name: "short-history", uid: "uid-short", ops: short}, {name: "long-history", uid: "uid-long", ops: long}}
	for _, s := range secrets {
		s.slot = strings.TrimSuffix(versioned.SnapshotName(s.uid, 1), "1")
		_, err := j.OwnerConn.Exec(ctx, suite.HistoryLoadSQL, suite.ToyNamespace, s.name, s.ops, string(s.uid), s.slot)
		require.NoError(t, err)
		// The newest listed snapshots (the retention limit plus one), as
		// the run's listing returns them, and a look-alike's name that no
		// call of the Secret's made.
		for n := s.ops - listed + 2; n <= s.ops; n++ {
			s.names = append(s.names, versioned.SnapshotName(s.uid, int64(n)))
		}
		s.names = append(s.names, versioned.SnapshotName(s.uid, int64(s.ops+7)))
	}
	// A journal as it is after a while: 40 other Secrets, 500 updates each.
	for i := range 40 {
		name := fmt.Sprintf("other-%d", i)
		_, err := j.OwnerConn.Exec(ctx, suite.HistoryLoadSQL, suite.ToyNamespace, name, 500, "uid-"+name,
			strings.TrimSuffix(versioned.SnapshotName(types.UID("uid-"+name), 1), "1"))
		require.NoError(t, err)
	}
	_, err := j.OwnerConn.Exec(ctx, `ANALYZE keyledger.operations; ANALYZE keyledger.records`)
	require.NoError(t, err)

	targets := func(s *secret) []string {
		out := make([]string, 0, len(s.names))
		for _, n := range s.names {
			out = append(out, store.SecretTarget(suite.ToyNamespace, n).String())
		}
		return out
	}
	sql := store.ReaderSQL()["step-records"]
	now, before := map[string]planCost{}, map[string]planCost{}
	for _, s := range secrets {
		args := []any{suite.ToyNamespace, s.name, versioned.StepCreateSnapshot, string(s.uid)}
		now[s.name] = explainCost(t, j.RoleConn, sql, append(args, targets(s))...)
		before[s.name] = explainCost(t, j.RoleConn, stepRecordsQueryBefore10, args...)
		t.Logf("EXPLAIN step-records of %s:\n%s", s.name, suite.ExplainText(t, j.RoleConn, sql, append(args, targets(s))...))
		t.Logf("%s (%d operations): step-records rows=%d buffers=%d; before migration 10 rows=%d buffers=%d",
			s.name, s.ops, now[s.name].rows, now[s.name].buffers, before[s.name].rows, before[s.name].buffers)

		// And it answers exactly the listed snapshots' records, as the
		// namespace role: one group per listed slot a call made, the call
		// then the applied result with the snapshot's UID; nothing for the
		// look-alike's name.
		groups, err := j.Role.StepRecords(ctx, store.StepRecordsParams{Namespace: suite.ToyNamespace, Name: s.name,
			Step: versioned.StepCreateSnapshot, CallUID: string(s.uid), Targets: targets(s)})
		require.NoError(t, err)
		require.Len(t, groups, listed-1, s.name)
		for i, g := range groups {
			n := s.ops - listed + 2 + i
			require.Len(t, g, 2, s.name)
			require.Equal(t, store.RecordAuthorityCall, g[0].Kind)
			require.Equal(t, string(s.uid), g[0].UID)
			require.Equal(t, store.RecordAuthorityResult, g[1].Kind)
			require.Equal(t, fmt.Sprintf("%s-snap-%d", s.uid, n), g[1].UID)
			require.Equal(t, "secret/"+versioned.SnapshotName(s.uid, int64(n)), g[1].Target.String())
		}
		// Another UID's calls prove nothing of these names.
		groups, err = j.Role.StepRecords(ctx, store.StepRecordsParams{Namespace: suite.ToyNamespace, Name: s.name,
			Step: versioned.StepCreateSnapshot, CallUID: "uid-other", Targets: targets(s)})
		require.NoError(t, err)
		require.Empty(t, groups)
	}
	require.Equal(t, now["short-history"].rows, now["long-history"].rows,
		"the provenance read touches the same rows at %d and %d operations on the Secret", short, long)
	require.LessOrEqual(t, now["long-history"].buffers, now["short-history"].buffers+2,
		"the provenance read touches the same buffers at %d and %d operations on the Secret", short, long)
	// A few plan rows per listed record (the record, its operation, its
	// binding call, each checked by row-level security), far below the
	// history.
	require.Less(t, now["long-history"].rows, int64(20*listed))
	// The measure tells the two reads apart: migration 9's grew with the
	// history.
	require.Greater(t, before["long-history"].rows, 10*before["short-history"].rows)
}
