package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// cpuProcesses names, by the kernel's comm (at most 15 bytes), the
// processes this test binary starts that share the machine's cores with a
// run: the control plane's. PostgreSQL is measured from its container's
// cgroup, a keyledger process from its own rusage.
var cpuProcesses = map[string]string{
	"kube-apiserver":  "kube-apiserver",
	"etcd":            "etcd",
	"kube-controller": "kube-controller-manager",
}

// cpuOrder is the order the report names them in.
var cpuOrder = []string{"kube-apiserver", "etcd", "kube-controller-manager", "postgresql", "keyledger", "floor client"}

// cpuUse is CPU time by process name.
type cpuUse map[string]time.Duration

// cpuNow reads the CPU time used so far by every control-plane process
// this test binary started (each thread's schedstat, in nanoseconds) and
// by the PostgreSQL container.
func cpuNow() cpuUse {
	out := cpuUse{}
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
		name, ok := cpuProcesses[s[open+1:closing]]
		fields := strings.Fields(s[closing+1:])
		if !ok || len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err != nil || ppid != self {
			continue
		}
		out[name] += threadsCPU(filepath.Dir(path))
	}
	if shared.pg != nil {
		if d, ok := shared.pg.CPUTime(); ok {
			out["postgresql"] = d
		}
	}
	return out
}

// threadsCPU sums the time on CPU of every thread of the process at dir
// (/proc/PID): the first field of each task's schedstat.
func threadsCPU(dir string) time.Duration {
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

// since is the CPU time each process used from before to now.
func (before cpuUse) since() cpuUse {
	now := cpuNow()
	out := cpuUse{}
	for k, v := range now {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// total is the sum over every process.
func (u cpuUse) total() time.Duration {
	var sum time.Duration
	for _, v := range u {
		sum += v
	}
	return sum
}

// cpuReport is the medians, over runs, of each process's CPU time and of
// their sum, and what that sum means on this machine's cores (cpuFloor).
func cpuReport(uses []cpuUse) string {
	var parts []string
	for _, name := range cpuOrder {
		per := make([]time.Duration, len(uses))
		seen := false
		for i, u := range uses {
			per[i] = u[name]
			_, in := u[name]
			seen = seen || in
		}
		if seen {
			parts = append(parts, fmt.Sprintf("%s=%s", name, ms(median(per))))
		}
	}
	return fmt.Sprintf("%s; sum=%s on %d cores: at least %s of wall",
		strings.Join(parts, " "), ms(cpuFloor(uses)*time.Duration(runtime.NumCPU())), runtime.NumCPU(), ms(cpuFloor(uses)))
}

// cpuFloor is the median over runs of the CPU time every process used,
// divided by the machine's cores: however the work is scheduled, a run
// that needs that much CPU takes at least that long on this machine.
func cpuFloor(uses []cpuUse) time.Duration {
	sums := make([]time.Duration, len(uses))
	for i, u := range uses {
		sums[i] = u.total()
	}
	return median(sums) / time.Duration(runtime.NumCPU())
}

// machineUses is the CPU use of each sample.
func machineUses(samples []sample) []cpuUse {
	out := make([]cpuUse, len(samples))
	for i, s := range samples {
		out[i] = s.machine
	}
	return out
}
