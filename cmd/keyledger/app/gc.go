package app

import "runtime/debug"

// OneShotGCPercent is the collector's GOGC for a keyledger process unless
// the environment sets GOGC. A process runs one operation and exits: a
// retirement allocates about 7 MB over its life and a 64-Secret credential
// plan about 14 MB, and each keeps about 1 MB live, so the default heap
// goal (4 MB at GOGC=100) collected two to four times per run, each time
// scanning every request's goroutine stack while the API server and
// PostgreSQL wanted the same two cores. At 400 the goal starts at 16 MB:
// a typical run collects at most once, and the heap is still bounded, at
// five times what is live (GOMEMLIMIT, when set, still applies).
const OneShotGCPercent = 400

// TuneCollector sets OneShotGCPercent unless lookup finds GOGC set (the
// environment's choice stands). main calls it first.
func TuneCollector(lookup func(string) (string, bool)) {
	if _, set := lookup("GOGC"); set {
		return
	}
	debug.SetGCPercent(OneShotGCPercent)
}
