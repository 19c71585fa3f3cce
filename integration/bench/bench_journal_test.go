package bench

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// TestBenchPlanSyncs: 1,000 consecutive syncs (keyledger run, the release
// binary) of one credential plan, then journal prune. It prints the median
// wall time and journal transactions of syncs 6-15 ("the 10th") and
// 991-1000 ("the 1,000th") and their ratio, and the journal's size (rows
// and bytes) after pruning, beside the same for a plan synced 100 times:
// the size after a prune does not follow the number of syncs.
// KEYLEDGER_BENCH_SYNCS changes the 1,000.
func TestBenchPlanSyncs(t *testing.T) {
	benchEnabled(t)
	e := suite.Setup(t)
	syncs := 1000
	if v, err := strconv.Atoi(os.Getenv("KEYLEDGER_BENCH_SYNCS")); err == nil && v >= 20 {
		syncs = v
	}
	secrets := []suite.PlanSecret{suite.StandardSecret("sync-a"), suite.StandardSecret("sync-b")}
	runner := e.AsCredentialRunner(suite.CredentialPlan(e.NS, "mut-sync", secrets))
	release := withBinary(releaseBinary(t))
	type syncRun struct {
		wall time.Duration
		txs  float64
	}
	once := func(mutation string) syncRun {
		t.Helper()
		path := e.WriteCommand(mutation+".json", suite.CredentialPlan(e.NS, mutation, secrets))
		start := time.Now()
		r := e.Keyledger([]string{"run", path}, runner, release)
		wall := time.Since(start)
		require.Equal(t, 0, r.Code, "sync of %s: stdout %s stderr %s", mutation, r.Stdout, r.Stderr)
		txs, _ := suite.RunSummary(t, r)["pg_transactions"].(float64)
		return syncRun{wall: wall, txs: txs}
	}
	sync := func(mutation string, n int) []syncRun {
		t.Helper()
		out := make([]syncRun, 0, n)
		for range n {
			out = append(out, once(mutation))
		}
		return out
	}
	operator := suite.Connect(t, e.Journal.OperatorURL)
	// The journal's own cost of a sync's run lookup: shared buffers the
	// newest-run query touches, as the run's role (deterministic, unlike
	// wall time on a shared machine).
	lookupBuffers := func(plan string) string {
		t.Helper()
		// Twice: the first query of a session also reads the catalog
		// (the owner check of the policies), which is not the lookup's.
		suite.ExplainText(t, operator, store.ReaderSQL()["latest-run"], plan, e.NS)
		plan = suite.ExplainText(t, operator, store.ReaderSQL()["latest-run"], plan, e.NS)
		for _, line := range strings.Split(plan, "\n") {
			if l := strings.TrimSpace(line); strings.HasPrefix(l, "Buffers:") {
				return strings.TrimPrefix(l, "Buffers: ")
			}
		}
		return "?"
	}
	owner, err := store.Open(t.Context(), e.Journal.OwnerURL)
	require.NoError(t, err)
	defer owner.Close()
	conn := suite.Connect(t, e.Journal.OwnerURL)
	size := func(plan string) (ops, records, bytes int) {
		t.Helper()
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(DISTINCT o.id), count(r.id),
			coalesce(sum(pg_column_size(r.*)), 0) + coalesce(sum(DISTINCT pg_column_size(o.*)), 0)
			FROM keyledger.operations o JOIN keyledger.records r ON r.operation_id = o.id
			WHERE o.run_series = $1`, plan).Scan(&ops, &records, &bytes))
		return
	}

	short := sync("mut-sync-short", 100)
	_, err = owner.Prune(t.Context(), 0)
	require.NoError(t, err)
	so, sr, sb := size("mut-sync-short")

	long := sync("mut-sync", syncs)
	window := func(from, to int) (time.Duration, float64) {
		var walls []time.Duration
		var txs []float64
		for _, s := range long[from-1 : to] {
			walls, txs = append(walls, s.wall), append(txs, s.txs)
		}
		return median(walls), median(txs)
	}
	w10, t10 := window(6, 15)
	wN, tN := window(syncs-9, syncs)
	buffersN := lookupBuffers("mut-sync")
	// The same moment's control: 10 syncs of the long plan interleaved
	// with the first 10 of a fresh plan (same journal, same machine load).
	var again, fresh []time.Duration
	for range 10 {
		again = append(again, once("mut-sync").wall)
		fresh = append(fresh, once("mut-sync-fresh").wall)
	}
	buffersFresh := lookupBuffers("mut-sync-fresh")
	lo, lr, lb := size("mut-sync")
	start := time.Now()
	res, err := owner.Prune(t.Context(), 0)
	require.NoError(t, err)
	pruneWall := time.Since(start)
	po, pr, pb := size("mut-sync")

	suite.BenchLine("plan-syncs secrets=%d syncs=%d (warm-up plan: %d)", len(secrets), syncs, len(short))
	suite.BenchLine("plan-syncs sync_10th wall_median=%s pg_transactions=%.0f (syncs 6-15)", ms(w10), t10)
	suite.BenchLine("plan-syncs sync_%dth wall_median=%s pg_transactions=%.0f (syncs %d-%d)", syncs, ms(wN), tN, syncs-9, syncs)
	suite.BenchLine("plan-syncs ratio %dth/10th=%.2f", syncs, float64(wN)/float64(w10))
	suite.BenchLine("plan-syncs interleaved: sync_%d+ wall_median=%s, fresh plan sync_1-10 wall_median=%s, ratio=%.2f",
		syncs+1, ms(median(again)), ms(median(fresh)), float64(median(again))/float64(median(fresh)))
	suite.BenchLine("plan-syncs newest-run lookup buffers: %d runs %q, 10 runs %q", syncs+10, buffersN, buffersFresh)
	suite.BenchLine("plan-syncs journal before prune: operations=%d records=%d bytes=%d", lo, lr, lb)
	suite.BenchLine("plan-syncs prune removed operations=%d records=%d wall=%s", res.Operations, res.Records, ms(pruneWall))
	suite.BenchLine("plan-syncs journal after prune: %d syncs operations=%d records=%d bytes=%d; 100 syncs operations=%d records=%d bytes=%d",
		syncs, po, pr, pb, so, sr, sb)
	require.Equal(t, []int{so, sr}, []int{po, pr}, "the size after a prune does not follow the number of syncs")
}
