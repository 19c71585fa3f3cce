package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"

	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// TestBenchVersioned measures one SecretUpdate with 20 retained versions
// (at the default limit, so it prunes one) as a process, and a `kubectl get`
// + `kubectl replace` of a Secret of the same size as the baseline,
// interleaved in the same run.
func TestBenchVersioned(t *testing.T) {
	benchEnabled(t)
	e := suite.Setup(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl not found: the baseline is skipped")
	}
	const runs = 9
	as := e.AsWriter("bench")
	data := func(i int) map[string][]byte {
		return map[string][]byte{"password": []byte(fmt.Sprintf("bench-value-%04d", i)), "user": []byte("app")}
	}
	s := e.CreateSecret(suite.PlainSecret("bench", data(0)))
	// Fill the history to the limit: 20 updates leave v1..v20 and live v21.
	for i := 1; i <= 20; i++ {
		cur := e.GetSecret("bench")
		suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "bench", cur.ResourceVersion, fmt.Sprintf("mut-fill-%d", i), data(i)), as), "completed")
	}
	require.Len(t, e.VersionsOf(s.UID), 20)

	bin := releaseBinary(t)
	var wall, base []time.Duration
	var summaries []map[string]any
	var samples []suite.Sample
	other, compared := compareBinary(), []suite.Sample(nil)
	// The same update through a session pooler (as TestBenchRetire).
	pooledURL := e.PooledIfInstalled("versioned-update", platform.PgBouncerOptions{PoolSize: 8})
	var pooled []suite.Sample
	// updateOnce updates the live Secret with binary, its journal at
	// dbURL, and checks the one write and the retention limit.
	updateOnce := func(binary, dbURL, mutation string, value int) suite.Sample {
		t.Helper()
		cur := e.GetSecret("bench")
		path := e.WriteCommand(mutation+".json", suite.UpdateCommand(e.NS, "bench", cur.ResourceVersion, mutation, data(value)))
		ks := measureRun(e, t, binary, []string{"run", path}, dbURL, as)
		require.Equal(t, 1, e.SecretWrites("bench", cur.ResourceVersion, e.GetSecret("bench").ResourceVersion))
		require.Len(t, e.VersionsOf(s.UID), 20, "still at the limit: one pruned per update")
		return ks
	}
	for i := range runs {
		ks := updateOnce(bin, e.Journal.OperatorURL, fmt.Sprintf("mut-bench-%d", i), 100+i)
		wall = append(wall, ks.Wall)
		summaries = append(summaries, ks.Summary)
		samples = append(samples, ks)
		if pooledURL != "" {
			pooled = append(pooled, updateOnce(bin, pooledURL, fmt.Sprintf("mut-pooled-%d", i), 300+i))
		}
		if other != "" {
			compared = append(compared, updateOnce(other, e.Journal.OperatorURL, fmt.Sprintf("mut-compare-%d", i), 200+i))
		}
		if kubectl != "" {
			b := e.CreateSecret(suite.PlainSecret(fmt.Sprintf("base-%d", i), data(i)))
			base = append(base, kubectlGetReplace(t, kubectl, e.Kube.KubeconfigFile(), e.NS, b.Name))
		}
	}
	last := summaries[len(summaries)-1]
	suite.BenchLine("versioned-update retained=20 limit=20 runs=%d", runs)
	suite.BenchLine("versioned-update api_requests=%v by_verb=%q pg_transactions=%v", last["api_requests"], last["api_requests_by_verb"], last["pg_transactions"])
	suite.BenchLine("versioned-update target: POST secrets=1 (snapshot create), DELETE secrets=1 (prune), PUT secrets=1 (replace), LIST secrets=1 (metadata only: one history listing per run) and GET secrets=2: the precheck's live read (it serves the first decision; the replace's resourceVersion precondition catches any write since), then the live write's decision reads the archive again; plus the permission matrix")
	suite.BenchLine("versioned-update wall_median=%s", ms(median(wall)))
	if len(base) > 0 {
		suite.BenchLine("baseline kubectl get+replace wall_median=%s", ms(median(base)))
		suite.BenchLine("ratio keyledger/kubectl-pair=%.2f", float64(median(wall))/float64(median(base)))
	}
	benchPhases(t, "versioned-update", samples)
	if pooledURL != "" {
		benchPooled(t, "versioned-update", pooled, wall, base)
	}
	benchCompare(t, "versioned-update", samples, compared, base)
	benchFloors(t, e, kubeconfigOf(as, e.NS, "bench"), e.NS, "bench", pooledURL)
}

// TestBenchVersionedDecode measures the CPU one decode of the largest valid
// SecretUpdate takes (versioned.MaxUpdateKeys keys, a 64 KiB file: one
// PBKDF2 verifier over every value), against a one-key SecretUpdate decoded
// in the same run. The bound is 250 ms of CPU.
func TestBenchVersionedDecode(t *testing.T) {
	benchEnabled(t)
	dir := t.TempDir()
	write := func(name string, cmd map[string]any) string {
		b, err := json.Marshal(cmd)
		require.NoError(t, err)
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, b, 0o600))
		return path
	}
	maxCmd, _ := suite.MaximalUpdate("shop", "db", "7", "mut-max", 0)
	maxPath := write("max.json", maxCmd)
	onePath := write("one.json", suite.UpdateCommand("shop", "db", "7", "mut-one", map[string][]byte{"password": []byte("hunter2")}))
	info, err := os.Stat(maxPath)
	require.NoError(t, err)

	decode := func(path string) (cpu, wall time.Duration) {
		f, err := command.Read(path, command.ReadOptions{})
		require.NoError(t, err)
		before := cpuTime(t)
		start := time.Now()
		_, err = versioned.Decode(f)
		wall = time.Since(start)
		require.NoError(t, err)
		return cpuTime(t) - before, wall
	}
	const runs = 9
	var maxCPU, maxWall, oneCPU []time.Duration
	for range runs {
		c, w := decode(maxPath)
		maxCPU, maxWall = append(maxCPU, c), append(maxWall, w)
		c, _ = decode(onePath)
		oneCPU = append(oneCPU, c)
	}
	suite.BenchLine("versioned-decode keys=%d file_bytes=%d runs=%d bound_cpu=250.0ms", versioned.MaxUpdateKeys, info.Size(), runs)
	suite.BenchLine("versioned-decode largest cpu_median=%s wall_median=%s", ms(median(maxCPU)), ms(median(maxWall)))
	suite.BenchLine("baseline versioned-decode keys=1 cpu_median=%s", ms(median(oneCPU)))
	suite.BenchLine("ratio largest/one-key cpu=%.2f", float64(median(maxCPU))/float64(median(oneCPU)))
}

// cpuTime is this process's user plus system CPU time.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
