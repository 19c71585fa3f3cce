//go:build failpoints

package failpoint

import (
	"os"
	"syscall"
)

var current = parse(os.Getenv(Env))

// Enabled reports whether failpoints are compiled in.
const Enabled = true

// Hit kills the process with SIGKILL (no deferred cleanup, like a crash) when
// name is the armed failpoint.
func Hit(name string) {
	if current.hit(name) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not deliverable late; never return
	}
}
