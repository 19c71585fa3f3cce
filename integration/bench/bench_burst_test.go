package bench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
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
	e := suite.Setup(t)
	// Its namespaces (over 500) are deleted when it ends; the namespace
	// controller's work on them would run under the next benchmark's
	// measurements (it once made the credential plan's median 2.6 times
	// slower), so the bench waits until they are gone. Registered here, it
	// runs after every tenant's cleanup and before this namespace's own.
	t.Cleanup(func() { awaitSiblingNamespacesGone(t, e, 10*time.Minute) })
	bin := releaseBinary(t)
	perRun := burstFloor(e, bin, 12)
	shapes := []burstShape{{50, 30, false}, {50, 30, true}, {200, 90, false}, {200, 90, true}}
	for _, s := range shapes {
		if s.pooled && pooledBenchSkipped(e, s.row()) {
			continue
		}
		benchBurst(e, s, bin, perRun)
	}
}

// pooledBenchSkipped says (and prints why) a pooled row cannot run.
func pooledBenchSkipped(e *suite.Env, row string) bool {
	if err := platform.PgBouncerInstalled(); err != nil {
		suite.BenchLine("%s skipped: %v", row, err)
		return true
	}
	return false
}

// burstFloor measures k credentials runs one after another, each on a
// namespace and plan of its own in a journal without a limit, and returns
// the median CPU time one run needs on this machine (every process:
// keyledger's rusage, the control plane's threads, PostgreSQL's cgroup).
func burstFloor(e *suite.Env, bin string, k int) time.Duration {
	e.T.Helper()
	j := e.BurstTenants(k)
	samples := make([]suite.Sample, k)
	for i, tn := range j.Tenants {
		samples[i] = measureRun(e, e.T, bin, []string{"run", tn.Path}, tn.URL, tn.As)
	}
	uses := machineUses(samples)
	suite.BenchLine("burst floor: one credentials run alone (median of %d) wall=%s cpu %s", k, ms(median(walls(samples))), cpuReport(uses))
	return cpuFloor(uses) * time.Duration(runtime.NumCPU())
}

// benchBurst runs one burst shape on fresh namespaces and prints its row.
func benchBurst(e *suite.Env, s burstShape, bin string, perRun time.Duration) {
	e.T.Helper()
	j := e.BurstTenants(s.n)
	j.LimitConnections(e.T, s.limit)
	if s.pooled {
		j.ThroughPooler(e.T, 4, s.limit-5)
	}
	before := suite.CPUNow()
	b := e.Converge(j.Tenants, 20, withBinary(bin))
	cpu := before.Since().Total()
	var wall, converged []time.Duration
	for _, r := range b.Runs {
		cpu += r.CPU
		wall = append(wall, r.Wall)
		if r.Code == 0 {
			converged = append(converged, r.SinceBurst)
		}
	}
	e.RequireCreated(j.Tenants)
	var refusals []string
	for _, k := range b.RefusalKinds() {
		refusals = append(refusals, fmt.Sprintf("%s=%d", strings.ReplaceAll(k, " ", ":"), b.Refusals[k]))
	}
	floor := perRun * time.Duration(s.n) / time.Duration(runtime.NumCPU())
	suite.BenchLine("%s namespaces=%d connection_limit=%d rounds=%d processes=%d refused=%d [%s] all_converged=%s plans_per_s=%.1f "+
		"process_wall median=%s p99=%s converged_at median=%s p99=%s cpu=%s floor=%s (%d x %s on %d cores) ratio all_converged/floor=%.2f cpu/floor_cpu=%.2f",
		s.row(), s.n, s.limit, b.Rounds, len(b.Runs), b.Refused(), strings.Join(refusals, " "), ms(b.Took), float64(s.n)/b.Took.Seconds(),
		ms(median(wall)), ms(percentile(wall, 99)), ms(median(converged)), ms(percentile(converged, 99)), ms(cpu),
		ms(floor), s.n, ms(perRun), runtime.NumCPU(), float64(b.Took)/float64(floor), float64(cpu)/float64(perRun*time.Duration(s.n)))
}

// awaitSiblingNamespacesGone waits until no namespace of this test but
// e.NS remains: those whose names share e.NS's generated prefix (its name
// less the 5 characters the API server appended).
func awaitSiblingNamespacesGone(t *testing.T, e *suite.Env, timeout time.Duration) {
	prefix := e.NS[:len(e.NS)-5]
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start, left := time.Now(), 0
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := e.Kube.Client().CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: "keyledger.test/test=true"})
		if err != nil {
			return false, nil
		}
		left = 0
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, prefix) && ns.Name != e.NS {
				left++
			}
		}
		return left == 0, nil
	})
	if err != nil {
		t.Errorf("%d namespaces of the burst still there after %s", left, timeout)
		return
	}
	suite.BenchLine("burst namespaces gone %s after the burst", time.Since(start).Round(time.Second))
}
