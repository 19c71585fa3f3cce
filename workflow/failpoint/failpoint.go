// Package failpoint kills the process at a named point of the engine so that
// integration tests can crash keyledger after every journaled transition and
// rerun it. Failpoints are compiled in only with the build tag "failpoints";
// a release binary ignores KEYLEDGER_FAILPOINT entirely.
//
// KEYLEDGER_FAILPOINT=NAME kills at the first hit of NAME; NAME#N at the N-th.
// Names are "after-" plus an engine event (after-prepare, after-call,
// after-send, after-answer, after-resolve, after-complete, after-refuse).
package failpoint

import (
	"strconv"
	"strings"
	"sync"
)

// Env is the environment variable that arms a failpoint.
const Env = "KEYLEDGER_FAILPOINT"

type armed struct {
	mu    sync.Mutex
	name  string
	nth   int
	count int
}

// parse reads NAME or NAME#N.
func parse(spec string) *armed {
	if spec == "" {
		return nil
	}
	name, nth := spec, 1
	if i := strings.LastIndexByte(spec, '#'); i > 0 {
		n, err := strconv.Atoi(spec[i+1:])
		if err == nil && n > 0 {
			name, nth = spec[:i], n
		}
	}
	return &armed{name: name, nth: nth}
}

// hit reports whether this hit of name is the armed one.
func (a *armed) hit(name string) bool {
	if a == nil || name != a.name {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.count++
	return a.count == a.nth
}
