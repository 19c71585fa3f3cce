package integration

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/keyledger/keyledger/integration/platform"
)

// burstShape is one burst the bench measures: n namespaces against a
// journal that accepts limit sessions, directly or through a session
// pooler.
type burstShape struct {
	n, limit int
	pooled   bool
}

func (s burstShape) row() string {
	via := "direct"
	if s.pooled {
		via = "pooled"
	}
	return fmt.Sprintf("burst-%d-%s", s.n, via)
}

// TestBenchBurstOfNamespaces is a platform-wide sync (issue 36): N
// namespaces, each with its own journal role, start their credentials hook
// (`keyledger run` of a one-Secret plan, the release binary) at the same
// moment against one journal whose connection limit is below N, directly
// and through a session pooler (PgBouncer, a pool of 4 server sessions per
// role, max_db_connections a few below the limit). The runs that exit 69
// or 75 are started again at once, as the hook Job's podFailurePolicy
// retries them, until every plan has completed; any other exit fails the
// bench. Each row prints the plans converged per second, the median and
// p99 wall time of one process and of a namespace's convergence, the
// refusals, the rounds, the CPU the burst used, and the floor: N times the
// CPU time one uncontended run needs (every process on the machine,
// measured alone), over the cores.
func TestBenchBurstOfNamespaces(t *testing.T) {
	benchEnabled(t)
	e := setup(t)
	bin := releaseBinary(t)
	perRun := e.burstFloor(bin, 12)
	shapes := []burstShape{{50, 30, false}, {50, 30, true}, {200, 90, false}, {200, 90, true}}
	for _, s := range shapes {
		if s.pooled && e.pooledBenchSkipped(s.row()) {
			continue
		}
		e.benchBurst(s, bin, perRun)
	}
}

// pooledBenchSkipped says (and prints why) a pooled row cannot run.
func (e *env) pooledBenchSkipped(row string) bool {
	if err := platform.PgBouncerInstalled(); err != nil {
		benchLine("%s skipped: %v", row, err)
		return true
	}
	return false
}

// burstFloor measures k credentials runs one after another, each on a
// namespace and plan of its own in a journal without a limit, and returns
// the median CPU time one run needs on this machine (every process:
// keyledger's rusage, the control plane's threads, PostgreSQL's cgroup).
func (e *env) burstFloor(bin string, k int) time.Duration {
	e.t.Helper()
	j := e.burstTenants(k)
	samples := make([]sample, k)
	for i, tn := range j.tenants {
		samples[i] = e.measureRun(e.t, bin, []string{"run", tn.path}, tn.url, tn.as)
	}
	uses := machineUses(samples)
	benchLine("burst floor: one credentials run alone (median of %d) wall=%s cpu %s", k, ms(median(walls(samples))), cpuReport(uses))
	return cpuFloor(uses) * time.Duration(runtime.NumCPU())
}

// benchBurst runs one burst shape on fresh namespaces and prints its row.
func (e *env) benchBurst(s burstShape, bin string, perRun time.Duration) {
	e.t.Helper()
	j := e.burstTenants(s.n)
	j.limitConnections(e.t, s.limit)
	if s.pooled {
		j.throughPooler(e.t, 4, s.limit-5)
	}
	before := cpuNow()
	b := e.converge(j.tenants, 20, withBinary(bin))
	cpu := before.since().total()
	var wall, converged []time.Duration
	for _, r := range b.runs {
		cpu += r.CPU
		wall = append(wall, r.wall)
		if r.Code == 0 {
			converged = append(converged, r.sinceBurst)
		}
	}
	e.requireCreated(j.tenants)
	var refusals []string
	for _, k := range b.refusalKinds() {
		refusals = append(refusals, fmt.Sprintf("%s=%d", strings.ReplaceAll(k, " ", ":"), b.refusals[k]))
	}
	floor := perRun * time.Duration(s.n) / time.Duration(runtime.NumCPU())
	benchLine("%s namespaces=%d connection_limit=%d rounds=%d processes=%d refused=%d [%s] all_converged=%s plans_per_s=%.1f "+
		"process_wall median=%s p99=%s converged_at median=%s p99=%s cpu=%s floor=%s (%d x %s on %d cores) ratio all_converged/floor=%.2f cpu/floor_cpu=%.2f",
		s.row(), s.n, s.limit, b.rounds, len(b.runs), b.refused(), strings.Join(refusals, " "), ms(b.took), float64(s.n)/b.took.Seconds(),
		ms(median(wall)), ms(percentile(wall, 99)), ms(median(converged)), ms(percentile(converged, 99)), ms(cpu),
		ms(floor), s.n, ms(perRun), runtime.NumCPU(), float64(b.took)/float64(floor), float64(cpu)/float64(perRun*time.Duration(s.n)))
}
