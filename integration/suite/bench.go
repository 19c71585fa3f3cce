package suite

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/keyledger/keyledger/phase"
)

// ConcurrentPlanSecrets is a plan's n standard Secrets and their names.
func ConcurrentPlanSecrets(n int) ([]PlanSecret, []string) {
	var secrets []PlanSecret
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("conc-plan-%d", i))
		secrets = append(secrets, StandardSecret(names[i]))
	}
	return secrets, names
}

// CPUProcesses names, by the kernel's comm (at most 15 bytes), the
// processes this test binary starts that share the machine's cores with a
// run: the control plane's. PostgreSQL is measured from its container's
// cgroup, a keyledger process from its own rusage.
var CPUProcesses = map[string]string{
	"kube-apiserver":  "kube-apiserver",
	"etcd":            "etcd",
	"kube-controller": "kube-controller-manager",
}

// CPUUse is CPU time by process name.
type CPUUse map[string]time.Duration

// CPUNow reads the CPU time used so far by every control-plane process
// this test binary started (each thread's schedstat, in nanoseconds) and
// by the PostgreSQL container.
func CPUNow() CPUUse {
	out := CPUUse{}
	self := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		name, ok := CPUProcesses[s[open+1:closing]]
		fields := strings.Fields(s[closing+1:])
		if !ok || len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err != nil || ppid != self {
			continue
		}
		out[name] += ThreadsCPU(filepath.Dir(path))
	}
	if shared.pg != nil {
		if d, ok := shared.pg.CPUTime(); ok {
			out["postgresql"] = d
		}
	}
	return out
}

// ThreadsCPU sums the time on CPU of every thread of the process at dir
// (/proc/PID): the first field of each task's schedstat.
func ThreadsCPU(dir string) time.Duration {
	tasks, _ := filepath.Glob(filepath.Join(dir, "task", "*", "schedstat"))
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			sum += time.Duration(ns)
		}
	}
	return sum
}

// Since is the CPU time each process used from before to now.
func (before CPUUse) Since() CPUUse {
	now := CPUNow()
	out := CPUUse{}
	for k, v := range now {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// Total is the sum over every process.
func (u CPUUse) Total() time.Duration {
	var sum time.Duration
	for _, v := range u {
		sum += v
	}
	return sum
}

// Sample is one measured process run.
type Sample struct {
	Wall    time.Duration
	Summary map[string]any
	// phases is the process's phase line (package phase), when it printed one.
	Phases *phase.Line
	// machine is the CPU time each process on the machine spent while it
	// ran (CPUNow), its own ("keyledger", rusage) included.
	Machine CPUUse
}

// PeakRSS is keyledger's own peak RSS (VmHWM, KiB) from its summary line.
// The parent's rusage is not used: for a child started by fork+exec from a
// large process (this test binary) it reports the parent's memory.
func (s Sample) PeakRSS() int64 { return s.KiB("peak_rss_kib") }

// KiB reads a KiB figure from the summary line.
func (s Sample) KiB(field string) int64 {
	v, _ := s.Summary[field].(float64)
	return int64(v)
}

// BenchLine prints one "BENCH " line of make bench's output.
func BenchLine(format string, args ...any) {
	fmt.Printf("BENCH "+format+"\n", args...)
}
