package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/phase"
)

// The phase breakdown of a run (#23): every benchmarked keyledger process
// runs with KEYLEDGER_TRACE_PHASES=1 and the parent's CLOCK_MONOTONIC at
// spawn, and prints one phase line on stderr (package phase); the bench
// prints the line of the median run beside the parent's wall time, and the
// floor of each kind of phase measured on this machine in the same run.

// traceEnv is the environment that asks a process for its phase line,
// with the spawn time read now.
func traceEnv() []string {
	return []string{phase.EnvTrace + "=1", phase.EnvSpawnNS + "=" + strconv.FormatInt(phase.Monotonic(), 10)}
}

// phasesOf reads the phase line from a process's stderr, if any.
func phasesOf(stderr string) *phase.Line {
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, `"msg":"phases"`) {
			var l phase.Line
			if json.Unmarshal([]byte(line), &l) == nil {
				return &l
			}
		}
	}
	return nil
}

func usMS(us int64) string { return fmt.Sprintf("%.2fms", float64(us)/1000) }

// benchPhases prints the phase line of the median run of samples (by wall
// time): each phase, their sum and its gap to the wall time the parent
// measured (the process's exit and the parent's wake-up, after the line).
// The phases count from the spawn time the parent stamped just before it
// started its clock, so they cannot add up to more than the wall time; a
// sum past it by more than phaseSlack means the measurement is broken (the
// parent did work between the two), and the bench fails.
func benchPhases(t *testing.T, row string, samples []suite.Sample) {
	t.Helper()
	s := medianSample(samples)
	if s.Phases == nil {
		suite.BenchLine("%s phases: no phase line (KEYLEDGER_TRACE_PHASES not honoured?)", row)
		return
	}
	l := s.Phases
	suite.BenchLine("%s phases of the median run (wall %s, origin %s, %d API requests on %d new connections, %d TLS handshakes):",
		row, ms(s.Wall), l.Origin, l.Requests, l.Connections, l.Handshakes)
	for _, p := range l.Phases {
		suite.BenchLine("%s phase %-58s %9s %5.1f%%", row, p.Name, usMS(p.US), 100*float64(p.US)/float64(s.Wall.Microseconds()))
	}
	gap := s.Wall.Microseconds() - l.SumUS
	suite.BenchLine("%s phases sum=%s wall=%s gap=%s (%.1f%% of wall: exit after the line, the parent's wait)",
		row, usMS(l.SumUS), ms(s.Wall), usMS(gap), 100*float64(gap)/float64(s.Wall.Microseconds()))
	if gap < -phaseSlack.Microseconds() {
		t.Errorf("%s: the phases add up to %s more than the wall time: the spawn time was stamped before other work of the parent", row, usMS(-gap))
	}
}

// medianSample is the sample of the median wall time.
func medianSample(samples []suite.Sample) suite.Sample {
	sorted := slices.Clone(samples)
	slices.SortFunc(sorted, func(a, b suite.Sample) int { return int(a.Wall - b.Wall) })
	return sorted[len(sorted)/2]
}

// phaseSlack is how far the phases may add up past the wall time: the
// parent stamps the spawn time and then starts its clock, microseconds
// apart.
const phaseSlack = time.Millisecond

// compareBinary is KEYLEDGER_BENCH_COMPARE: another keyledger build (say,
// main's) that the benchmarks run interleaved with this one, each run
// beside one of this build's, so that both are measured in the same
// machine conditions.
func compareBinary() string { return os.Getenv("KEYLEDGER_BENCH_COMPARE") }

// benchCompare prints the other build's median, its ratio to the kubectl
// pair and this build's ratio to it, and its median run's phases.
func benchCompare(t *testing.T, row string, ours, theirs []suite.Sample, pair []time.Duration) {
	t.Helper()
	if len(theirs) == 0 {
		return
	}
	suite.BenchLine("%s compare (KEYLEDGER_BENCH_COMPARE, interleaved) wall_median=%s this_build=%s ratio this/compare=%.2f",
		row, ms(median(walls(theirs))), ms(median(walls(ours))), float64(median(walls(ours)))/float64(median(walls(theirs))))
	if len(pair) > 0 {
		suite.BenchLine("%s compare ratio compare/kubectl-pair=%.2f", row, float64(median(walls(theirs)))/float64(median(pair)))
	}
	benchPhases(t, row+" compare", theirs)
}

// walls are the samples' wall times.
func walls(samples []suite.Sample) []time.Duration {
	out := make([]time.Duration, len(samples))
	for i, x := range samples {
		out[i] = x.Wall
	}
	return out
}

// benchPooled prints row's runs through the session pooler (interleaved
// with the direct runs, whose wall times are direct): their median, its
// ratio to the direct median and to the kubectl pair, and the phases.
func benchPooled(t *testing.T, row string, pooled []suite.Sample, direct, pair []time.Duration) {
	t.Helper()
	suite.BenchLine("%s-pooled (through PgBouncer, session mode, DISCARD ALL between clients) wall_median=%s ratio this/direct=%.2f",
		row, ms(median(walls(pooled))), float64(median(walls(pooled)))/float64(median(direct)))
	if len(pair) > 0 {
		suite.BenchLine("%s-pooled ratio keyledger/kubectl-pair=%.2f", row, float64(median(walls(pooled)))/float64(median(pair)))
	}
	benchPhases(t, row+"-pooled", pooled)
}

// benchFloors prints, measured now, the floor of each kind of phase: a Go
// process that exits at once (its start to main and its wall), one API
// request on a new loopback TLS connection and on a warm one (as the
// identity of kubeconfig, reading the Secret ns/name), a PostgreSQL
// connect as the journal's role and one write transaction's commit.
//
// pooledURL, when not empty, is the journal's URL through the session
// pooler: its connect is measured too.
func benchFloors(t *testing.T, e *suite.Env, kubeconfig, ns, name, pooledURL string) {
	t.Helper()
	const n = 15
	var startMain, goWall []time.Duration
	bin := floorBinary(t)
	for range n {
		cmd := exec.Command(bin)
		cmd.Env = traceEnv()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		require.NoError(t, cmd.Run())
		goWall = append(goWall, time.Since(start))
		v, err := strconv.ParseInt(strings.TrimSpace(stderr.String()), 10, 64)
		require.NoError(t, err)
		startMain = append(startMain, time.Duration(v))
	}
	suite.BenchLine("floor go-process-exits-at-once start_to_main=%s wall=%s", ms(median(startMain)), ms(median(goWall)))
	// keyledger itself doing nothing: its runtime start and package inits
	// (the five API groups' types, pgx, ...) are what a run starts with.
	var klMain, klWall []time.Duration
	for range n {
		s := measure(t, releaseBinary(t), []string{"version"}, []string{"PATH=" + os.Getenv("PATH")})
		require.NotNil(t, s.Phases)
		require.Equal(t, "start to main", s.Phases.Phases[0].Name)
		klMain = append(klMain, time.Duration(s.Phases.Phases[0].US)*time.Microsecond)
		klWall = append(klWall, s.Wall)
	}
	suite.BenchLine("floor keyledger-version (this binary, no work) start_to_main=%s wall=%s", ms(median(klMain)), ms(median(klWall)))

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	tlsConfig, err := rest.TLSConfigFor(cfg)
	require.NoError(t, err)
	url := strings.TrimSuffix(cfg.Host, "/") + "/api/v1/namespaces/" + ns + "/secrets/" + name
	get := func(client *http.Client) time.Duration {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
		start := time.Now()
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return time.Since(start)
	}
	var cold, warm []time.Duration
	for range n {
		tr := &http.Transport{TLSClientConfig: tlsConfig.Clone(), ForceAttemptHTTP2: true}
		client := &http.Client{Transport: tr}
		cold = append(cold, get(client))
		warm = append(warm, get(client))
		tr.CloseIdleConnections()
	}
	suite.BenchLine("floor api GET secret: new TLS connection (dial, handshake, request)=%s, on a warm connection=%s", ms(median(cold)), ms(median(warm)))

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	owner, err := pgx.Connect(ctx, e.Journal.OwnerURL)
	require.NoError(t, err)
	defer owner.Close(ctx)
	_, err = owner.Exec(ctx, `CREATE TABLE IF NOT EXISTS public.bench_floor (n int)`)
	require.NoError(t, err)
	var connect, connectCPU, pooledConnect, commit, roundTrip []time.Duration
	connectTo := func(url string) time.Duration {
		start := time.Now()
		c, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		took := time.Since(start)
		require.NoError(t, c.Close(ctx))
		return took
	}
	for range n {
		// The server's CPU for one session, from its fork to its exit
		// (the container's, over the connect and a pause for the exit).
		before, measured := suite.Postgres().CPUTime()
		connect = append(connect, connectTo(e.Journal.OperatorURL))
		if measured {
			time.Sleep(20 * time.Millisecond)
			after, _ := suite.Postgres().CPUTime()
			connectCPU = append(connectCPU, after-before)
		}
		if pooledURL != "" {
			pooledConnect = append(pooledConnect, connectTo(pooledURL))
		}

		start := time.Now()
		_, err = owner.Exec(ctx, `SELECT 1`)
		require.NoError(t, err)
		roundTrip = append(roundTrip, time.Since(start))

		start = time.Now()
		tx, err := owner.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO public.bench_floor VALUES (1)`)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		commit = append(commit, time.Since(start))
	}
	suite.BenchLine("floor postgresql connect (as the journal's role)=%s, one round trip (SELECT 1)=%s, one write transaction (BEGIN, INSERT, COMMIT)=%s",
		ms(median(connect)), ms(median(roundTrip)), ms(median(commit)))
	if len(connectCPU) > 0 {
		suite.BenchLine("floor postgresql cpu of one session (connect, authenticate, exit; the server's container)=%s", ms(median(connectCPU)))
	}
	if pooledURL != "" {
		suite.BenchLine("floor postgresql connect through the session pooler (as the journal's role, a warm server session)=%s", ms(median(pooledConnect)))
	}
}

// floorBinary builds a Go program that only prints the time from its
// parent's spawn (KEYLEDGER_TRACE_SPAWN_NS) to its main, and exits: the
// floor of a process's start, built as keyledger is (static, stripped).
func floorBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := `package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

func main() {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0)
	spawn, _ := strconv.ParseInt(os.Getenv("` + phase.EnvSpawnNS + `"), 10, 64)
	fmt.Fprintln(os.Stderr, ts.Nano()-spawn)
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module floor\n\ngo 1.26\n"), 0o600))
	bin := filepath.Join(dir, "floor")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// kubeconfigOf is the KUBECONFIG a run option sets for a command on the
// Secret ns/name.
func kubeconfigOf(opt suite.RunOption, ns, name string) string {
	cmd := exec.Command("keyledger", "history", ns+"/"+name)
	opt(cmd)
	for _, kv := range cmd.Env {
		if v, ok := strings.CutPrefix(kv, "KUBECONFIG="); ok {
			return v
		}
	}
	return ""
}
