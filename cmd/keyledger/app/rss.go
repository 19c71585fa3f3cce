package app

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// memoryKiB reads this process's memory figures from /proc/self/status in
// KiB: VmHWM (peak resident set), RssAnon and RssFile (current). Measured
// from inside: a parent's rusage of a forked child also counts the parent's
// memory at the time of the fork. Empty where /proc is not available.
func memoryKiB() map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmHWM" && name != "RssAnon" && name != "RssFile") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err == nil {
			out[name] = n
		}
	}
	return out
}
