package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/keyledger/keyledger/integration/platform"
)

// The soak's faults. Per-run faults (a SIGKILL 0-300 ms after start, a
// duplicate concurrent run) are drawn with each operation; platform faults
// are a schedule drawn up front and fired as operations start, so a seed
// gives the same plan every time.

// faultKind names one kind of fault.
type faultKind string

const (
	faultKillRun        faultKind = "keyledger-sigkill"
	faultDuplicate      faultKind = "duplicate-runs"
	faultPGCrash        faultKind = "postgres-crash"
	faultPGTerminate    faultKind = "postgres-terminate-sessions"
	faultPGPause        faultKind = "postgres-pause"
	faultKubeRestart    faultKind = "apiserver-kill-restart"
	faultKubePause      faultKind = "apiserver-pause"
	maxSoakPause                  = 3 * time.Second
	maxSoakKillDelay              = 300 * time.Millisecond
	opsPerPlatformFault           = 6
)

// platformFaults are the kinds the schedule fires.
var platformFaults = []faultKind{faultPGCrash, faultPGTerminate, faultPGPause, faultKubeRestart, faultKubePause}

// scheduledFault fires once AfterOps operations have started.
type scheduledFault struct {
	AfterOps int
	Kind     faultKind
	// Hold is how long a pause lasts, or how long the API server stays
	// down before its restart.
	Hold time.Duration
}

// faultSchedule has every platform kind once in the first half of the run
// (the faulter stops when the last operation settles), then one more fault
// per opsPerPlatformFault operations, at random points of the run.
func faultSchedule(rng *rand.Rand, ops int) []scheduledFault {
	kinds := append([]faultKind(nil), platformFaults...)
	for range max(0, ops/opsPerPlatformFault-len(kinds)) {
		kinds = append(kinds, platformFaults[rng.IntN(len(platformFaults))])
	}
	out := make([]scheduledFault, len(kinds))
	for i, k := range kinds {
		span := ops - 1
		if i < len(platformFaults) {
			span = ops / 2 // each kind once in the first half, before the last runs end
		}
		out[i] = scheduledFault{AfterOps: 1 + rng.IntN(max(1, span)), Kind: k, Hold: time.Duration(rng.Int64N(int64(maxSoakPause)))}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].AfterOps < out[j].AfterOps })
	return out
}

// faulter fires the schedule against the soak's own platform.
type faulter struct {
	kube     *platform.APIServerControl
	pg       *platform.Postgres
	schedule []scheduledFault
	started  chan int // operations started so far
	mu       sync.Mutex
	counts   map[faultKind]int
	errs     []error
}

func (f *faulter) count(k faultKind) {
	f.mu.Lock()
	f.counts[k]++
	f.mu.Unlock()
}

// run fires each scheduled fault when its operation count is reached,
// until the schedule is done or ctx ends.
func (f *faulter) run(ctx context.Context) {
	next := 0
	for next < len(f.schedule) {
		select {
		case <-ctx.Done():
			return
		case n := <-f.started:
			for next < len(f.schedule) && f.schedule[next].AfterOps <= n {
				if err := f.fire(ctx, f.schedule[next]); err != nil {
					f.mu.Lock()
					f.errs = append(f.errs, fmt.Errorf("fault %s: %w", f.schedule[next].Kind, err))
					f.mu.Unlock()
				}
				next++
			}
		}
	}
}

func (f *faulter) fire(ctx context.Context, s scheduledFault) error {
	f.count(s.Kind)
	switch s.Kind {
	case faultPGCrash:
		return f.pg.Crash(ctx)
	case faultPGTerminate: // a storm: every session, every 20 ms, for up to 1.5 s
		for deadline := time.Now().Add(s.Hold / 2); ; {
			if _, err := f.pg.TerminateSessions(ctx); err != nil || time.Now().After(deadline) {
				return err
			}
			time.Sleep(20 * time.Millisecond)
		}
	case faultPGPause:
		if err := f.pg.Pause(ctx); err != nil {
			return err
		}
		time.Sleep(s.Hold)
		return f.pg.Unpause(context.WithoutCancel(ctx))
	case faultKubeRestart:
		if err := f.kube.Kill(); err != nil {
			return err
		}
		time.Sleep(s.Hold / 3)
		return f.kube.Start(context.WithoutCancel(ctx))
	case faultKubePause:
		if err := f.kube.Pause(); err != nil {
			return err
		}
		time.Sleep(s.Hold)
		return f.kube.Resume()
	}
	return fmt.Errorf("unknown fault %s", s.Kind)
}
