package bench

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/keyledger/keyledger/integration/suite"
)

// cpuOrder is the order the report names them in.
var cpuOrder = []string{"kube-apiserver", "etcd", "kube-controller-manager", "postgresql", "keyledger", "floor client"}

// cpuReport is the medians, over runs, of each process's CPU time and of
// their sum, and what that sum means on this machine's cores (cpuFloor).
func cpuReport(uses []suite.CPUUse) string {
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
func cpuFloor(uses []suite.CPUUse) time.Duration {
	sums := make([]time.Duration, len(uses))
	for i, u := range uses {
		sums[i] = u.Total()
	}
	return median(sums) / time.Duration(runtime.NumCPU())
}

// machineUses is the CPU use of each sample.
func machineUses(samples []suite.Sample) []suite.CPUUse {
	out := make([]suite.CPUUse, len(samples))
	for i, s := range samples {
		out[i] = s.Machine
	}
	return out
}
