package credentials

import (
	"fmt"
	"strconv"
	"time"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// The environment settings that bound one unfinished run of a plan
// (store.RunBound): a run resumed EnvRunMaxResumes times, or older than
// EnvRunMaxAge, is closed (refused, run-resume-limit or run-age-limit) by
// the next sync, which starts a fresh run in its place.
const (
	EnvRunMaxResumes = "KEYLEDGER_RUN_MAX_RESUMES"
	EnvRunMaxAge     = "KEYLEDGER_RUN_MAX_AGE"
)

// DefaultRunBound: a rendered hook Job tries up to three pods per sync
// (backoffLimit 2), so ten resumes are three to four syncs; six hours is a
// working day's syncs without a run that never ends.
var DefaultRunBound = store.RunBound{MaxResumes: 10, MaxAge: 6 * time.Hour}

// Bounds of the settings: a run must be resumable at least once, and no
// run may stay unfinished longer than a month.
const (
	maxRunResumes = 1000
	minRunAge     = time.Minute
	maxRunAge     = 720 * time.Hour
)

// RunBoundFromEnv reads the two settings through lookup (unset: the
// default). A bad value is a *workflow.SettingError naming the variable
// (exit 64); the value is never repeated.
func RunBoundFromEnv(lookup func(string) (string, bool)) (store.RunBound, error) {
	b := DefaultRunBound
	if v, ok := lookup(EnvRunMaxResumes); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxRunResumes || strconv.Itoa(n) != v {
			return b, &workflow.SettingError{Name: EnvRunMaxResumes, Err: fmt.Errorf(EnvRunMaxResumes+" must be a decimal integer from 1 to %d without sign, leading zeros or white space (unset means %d)",
				maxRunResumes, DefaultRunBound.MaxResumes)}
		}
		b.MaxResumes = n
	}
	if v, ok := lookup(EnvRunMaxAge); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < minRunAge || d > maxRunAge {
			return b, &workflow.SettingError{Name: EnvRunMaxAge, Err: fmt.Errorf(EnvRunMaxAge+" must be a Go duration from %s to %s, e.g. 6h or 90m (unset means %s)",
				minRunAge, maxRunAge, DefaultRunBound.MaxAge)}
		}
		b.MaxAge = d
	}
	return b, nil
}
