package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/phase"
)

// Benchmarks are not tests: they run only with KEYLEDGER_BENCH=1 (make
// bench), assert nothing about time, and print "BENCH " lines with medians
// and ratios against a baseline measured in the same run.

func benchEnabled(t *testing.T) {
	t.Helper()
	if os.Getenv("KEYLEDGER_BENCH") != "1" {
		t.Skip("benchmark: run with KEYLEDGER_BENCH=1 (make bench)")
	}
}

// sample is one measured process run.
type sample struct {
	wall    time.Duration
	summary map[string]any
	// phases is the process's phase line (package phase), when it printed one.
	phases *phase.Line
	// machine is the CPU time each process on the machine spent while it
	// ran (cpuNow), its own ("keyledger", rusage) included.
	machine cpuUse
}

// peakRSS is keyledger's own peak RSS (VmHWM, KiB) from its summary line.
// The parent's rusage is not used: for a child started by fork+exec from a
// large process (this test binary) it reports the parent's memory.
func (s sample) peakRSS() int64 { return s.kib("peak_rss_kib") }

// kib reads a KiB figure from the summary line.
func (s sample) kib(field string) int64 {
	v, _ := s.summary[field].(float64)
	return int64(v)
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// benchEnv is the environment of a benchmarked keyledger invocation with
// args: PATH, HOME, the journal at dbURL, and what opts set for it (the
// run's identity; an option may read the arguments, as asWriter does).
func (e *env) benchEnv(dbURL string, args []string, opts ...runOption) []string {
	cmd := exec.Command("keyledger", args...)
	for _, o := range opts {
		o(cmd)
	}
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.dir, "KEYLEDGER_DATABASE_URL=" + dbURL}, cmd.Env...)
}

// measureRun measures binary with args in benchEnv's environment.
func (e *env) measureRun(t *testing.T, binary string, args []string, dbURL string, opts ...runOption) sample {
	t.Helper()
	return measure(t, binary, args, e.benchEnv(dbURL, args, opts...))
}

// measure runs a process and returns its wall time, peak RSS and, when it
// printed one, keyledger's "run finished" summary from stderr.
func measure(t *testing.T, name string, args []string, env []string) sample {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Read before the spawn time is taken (traceEnv): reading /proc takes
	// a while, and the process's first phase counts from that time.
	cpuBefore := cpuNow()
	cmd.Env = append(slices.Clip(env), traceEnv()...)
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("%s %v: %v\n%s%s", name, args, err, stdout.String(), stderr.String())
	}
	s := sample{wall: wall, phases: phasesOf(stderr.String()), machine: cpuBefore.since()}
	if ps := cmd.ProcessState; ps != nil {
		s.machine["keyledger"] = ps.UserTime() + ps.SystemTime()
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, `"msg":"run finished"`) {
			_ = json.Unmarshal([]byte(line), &s.summary)
		}
	}
	return s
}

func median[T int64 | time.Duration | float64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func benchLine(format string, args ...any) {
	fmt.Printf("BENCH "+format+"\n", args...)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

var release struct {
	once sync.Once
	path string
	err  error
}

// releaseBinary builds keyledger as `make build` does (static, stripped, no
// failpoints), once per run: benchmarks measure what ships.
func releaseBinary(t *testing.T) string {
	t.Helper()
	release.once.Do(func() {
		release.path = filepath.Join(shared.dir, "keyledger-release")
		build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", release.path, "./cmd/keyledger")
		build.Dir = platform.RepoRoot()
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			release.err = fmt.Errorf("building release keyledger: %v\n%s", err, out)
		}
	})
	if release.err != nil {
		t.Fatal(release.err)
	}
	return release.path
}

// withBinary runs another keyledger build (the release one) through
// e.keyledger.
func withBinary(path string) runOption {
	return func(c *exec.Cmd) { c.Path, c.Args[0] = path, path }
}

// kubectlGetReplace is the baseline of a single write: it reads a Secret and replaces it with one
// annotation added, as two kubectl processes.
func kubectlGetReplace(t *testing.T, kubectl, kubeconfig, ns, name string) time.Duration {
	t.Helper()
	start := time.Now()
	out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "-n", ns, "get", "secret", name, "-o", "json").Output()
	require.NoError(t, err)
	edited := strings.Replace(string(out), `"metadata": {`, `"metadata": {"annotations": {"bench.keyledger.dev/touched": "1"},`, 1)
	replace := exec.Command(kubectl, "--kubeconfig", kubeconfig, "replace", "-f", "-")
	replace.Stdin = strings.NewReader(edited)
	if out, err := replace.CombinedOutput(); err != nil {
		t.Fatalf("kubectl replace: %v: %s", err, out)
	}
	return time.Since(start)
}
