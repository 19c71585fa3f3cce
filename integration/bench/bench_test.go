package bench

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
	"github.com/keyledger/keyledger/integration/suite"
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

func mib(kib int64) float64 { return float64(kib) / 1024 }

// benchEnv is the environment of a benchmarked keyledger invocation with
// args: PATH, HOME, the journal at dbURL, and what opts set for it (the
// run's identity; an option may read the arguments, as AsWriter does).
func benchEnv(e *suite.Env, dbURL string, args []string, opts ...suite.RunOption) []string {
	cmd := exec.Command("keyledger", args...)
	for _, o := range opts {
		o(cmd)
	}
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.Dir, "KEYLEDGER_DATABASE_URL=" + dbURL}, cmd.Env...)
}

// measureRun measures binary with args in benchEnv's environment.
func measureRun(e *suite.Env, t *testing.T, binary string, args []string, dbURL string, opts ...suite.RunOption) suite.Sample {
	t.Helper()
	return measure(t, binary, args, benchEnv(e, dbURL, args, opts...))
}

// measure runs a process and returns its wall time, peak RSS and, when it
// printed one, keyledger's "run finished" summary from stderr.
func measure(t *testing.T, name string, args []string, env []string) suite.Sample {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Read before the spawn time is taken (traceEnv): reading /proc takes
	// a while, and the process's first phase counts from that time.
	cpuBefore := suite.CPUNow()
	cmd.Env = append(slices.Clip(env), traceEnv()...)
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("%s %v: %v\n%s%s", name, args, err, stdout.String(), stderr.String())
	}
	s := suite.Sample{Wall: wall, Phases: phasesOf(stderr.String()), Machine: cpuBefore.Since()}
	if ps := cmd.ProcessState; ps != nil {
		s.Machine["keyledger"] = ps.UserTime() + ps.SystemTime()
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, `"msg":"run finished"`) {
			_ = json.Unmarshal([]byte(line), &s.Summary)
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
		release.path = filepath.Join(suite.Dir(), "keyledger-release")
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
func withBinary(path string) suite.RunOption {
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
