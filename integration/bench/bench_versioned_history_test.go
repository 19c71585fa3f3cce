package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// TestBenchVersionedHistory measures one SecretUpdate at the retention
// limit on a Secret with a short journaled history (its 20 updates) and on
// one with a long history (the same 20 and 1000 older journaled updates, as
// a Secret updated daily for three years leaves them: their snapshots
// pruned long ago), interleaved in the same run, and prints both medians
// and their ratio (goal: about 1). With KEYLEDGER_BENCH_COMPARE, the
// compared binary runs the same pair, interleaved too.
func TestBenchVersionedHistory(t *testing.T) {
	benchEnabled(t)
	e := suite.Setup(t)
	const runs, past = 9, 1000
	as := e.AsWriter("short")
	asLong := e.AsWriter("long")
	data := func(i int) map[string][]byte {
		return map[string][]byte{"password": []byte(fmt.Sprintf("bench-value-%04d", i)), "user": []byte("app")}
	}
	owner := suite.Connect(t, e.Journal.OwnerURL)
	for _, name := range []string{"short", "long"} {
		s := e.CreateSecret(suite.PlainSecret(name, data(0)))
		who := as
		if name == "long" {
			who = asLong
			// The older updates, journaled as the versioned family journals
			// them (a create-snapshot call bound to the live UID and its
			// applied result), in slots far above the live counter.
			_, err := owner.Exec(t.Context(), suite.HistoryLoadSQL, e.NS, name, past, string(s.UID),
				strings.TrimSuffix(versioned.SnapshotName(s.UID, 1), "1")+"100")
			require.NoError(t, err)
		}
		for i := 1; i <= 20; i++ {
			cur := e.GetSecret(name)
			suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, name, cur.ResourceVersion, fmt.Sprintf("mut-fill-%s-%d", name, i), data(i)), who), "completed")
		}
		require.Len(t, e.VersionsOf(s.UID), 20)
	}
	_, err := owner.Exec(t.Context(), `ANALYZE keyledger.operations; ANALYZE keyledger.records`)
	require.NoError(t, err)

	bins := map[string]string{"this": releaseBinary(t)}
	if other := compareBinary(); other != "" {
		bins["compare"] = other
	}
	walls := map[string][]time.Duration{}
	n := 0
	for i := range runs {
		for _, which := range []string{"this", "compare"} {
			bin, ok := bins[which]
			if !ok {
				continue
			}
			for _, name := range []string{"short", "long"} {
				who := as
				if name == "long" {
					who = asLong
				}
				n++
				cur := e.GetSecret(name)
				mutation := fmt.Sprintf("mut-bench-%s-%s-%d", which, name, i)
				path := e.WriteCommand(mutation+".json", suite.UpdateCommand(e.NS, name, cur.ResourceVersion, mutation, data(100+n)))
				ks := measureRun(e, t, bin, []string{"run", path}, e.Journal.OperatorURL, who)
				require.Equal(t, 1, e.SecretWrites(name, cur.ResourceVersion, e.GetSecret(name).ResourceVersion))
				walls[which+" "+name] = append(walls[which+" "+name], ks.Wall)
			}
		}
	}
	// What records_snapshot_target costs an insert: the same load of
	// create-snapshot records (2000 updates' calls and results) with and
	// without it, interleaved, each in a transaction rolled back.
	insert := map[bool][]time.Duration{}
	for i := range 2 * runs {
		withIndex := i%2 == 0
		tx, err := owner.Begin(t.Context())
		require.NoError(t, err)
		if !withIndex {
			_, err = tx.Exec(t.Context(), `DROP INDEX keyledger.records_snapshot_target`)
			require.NoError(t, err)
		}
		start := time.Now()
		_, err = tx.Exec(t.Context(), suite.HistoryLoadSQL, e.NS, "insert-cost", 2000, "uid-insert-cost", "keyledger-h-insert-cost-v")
		insert[withIndex] = append(insert[withIndex], time.Since(start))
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(t.Context()))
	}
	suite.BenchLine("versioned-history insert of 4000 create-snapshot records: with records_snapshot_target wall_median=%s without=%s ratio=%.2f (runs=%d, interleaved)",
		ms(median(insert[true])), ms(median(insert[false])), float64(median(insert[true]))/float64(median(insert[false])), runs)
	for _, which := range []string{"this", "compare"} {
		if _, ok := bins[which]; !ok {
			continue
		}
		short, long := median(walls[which+" short"]), median(walls[which+" long"])
		suite.BenchLine("versioned-history %s short_history=20 wall_median=%s long_history=%d wall_median=%s ratio long/short=%.2f (runs=%d, interleaved)",
			which, ms(short), 20+past, ms(long), float64(long)/float64(short), runs)
	}
}
