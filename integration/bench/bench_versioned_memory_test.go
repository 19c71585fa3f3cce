package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
)

// TestBenchVersionedMemory: one SecretUpdate in a namespace holding 1,000
// other Secrets with 100 KiB of annotations each. Its peak RSS (VmHWM from
// keyledger's own summary line) must stay under 64 MiB and does not follow
// the other Secrets: it is printed beside the same update in an empty
// namespace.
func TestBenchVersionedMemory(t *testing.T) {
	benchEnabled(t)
	e := suite.Setup(t)
	bin := withBinary(releaseBinary(t))
	as := e.AsWriter("mem")
	data := func(i int) map[string][]byte {
		return map[string][]byte{"password": []byte(fmt.Sprintf("mem-%04d", i))}
	}
	e.CreateSecret(suite.PlainSecret("mem", data(0)))
	update := func(i int) int64 {
		t.Helper()
		cur := e.GetSecret("mem")
		r := e.RunCmd(suite.UpdateCommand(e.NS, "mem", cur.ResourceVersion, fmt.Sprintf("mut-mem-%d", i), data(i)), as, bin)
		suite.RequireOK(t, r, "completed")
		return suite.Sample{Summary: suite.RunSummary(t, r)}.PeakRSS()
	}
	var empty []int64
	for i := range 3 {
		empty = append(empty, update(1+i))
	}
	const others, annotationBytes = 1000, 100 << 10
	blob := strings.Repeat("a", annotationBytes)
	start := time.Now()
	e.SeedSecrets("bulky", others, func(int) map[string]string { return map[string]string{"example.com/blob": blob} })
	seeded := time.Since(start)
	var crowded []int64
	for i := range 3 {
		crowded = append(crowded, update(10+i))
	}
	suite.BenchLine("versioned-update-memory others=%d annotations_per_secret=%dKiB seed=%s", others, annotationBytes>>10, ms(seeded))
	suite.BenchLine("versioned-update-memory peak_rss_mib empty_namespace=%.1f crowded_namespace=%.1f limit=64 (median of %d)",
		mib(median(empty)), mib(median(crowded)), len(crowded))
	require.Less(t, median(crowded), int64(64<<10), "peak RSS under 64 MiB")
}
