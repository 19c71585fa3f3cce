package workflow

import (
	"fmt"
	"strings"
)

// Outcome is the one word a run reports on stdout and in the completion or
// refusal record.
type Outcome string

const (
	// OutcomeCompleted: the operation is in place and a call this run
	// sent was answered applied: the write is this run's.
	OutcomeCompleted Outcome = "completed"
	// OutcomeExisting: the operation is in place and this run wrote
	// nothing and ended nothing: it was ended before this run (an exact
	// replay) or by a concurrent run while this one ran, confirmed by this
	// run's read of the cluster; or it needed no write at all.
	OutcomeExisting Outcome = "existing"
	// OutcomeConverged: the operation is in place and this run journaled
	// its ending, settled from a re-read: the write was made by a call
	// whose applied answer this run did not see (its own call's answer
	// was lost, or an earlier or concurrent run's call).
	OutcomeConverged Outcome = "converged"
	// OutcomeRefused: the run failed closed; the reason says why.
	OutcomeRefused Outcome = "refused"
	// OutcomeUncertain: the outcome could not be settled within the bounded resolution; rerun the same command.
	OutcomeUncertain Outcome = "uncertain"
)

// Refused is a fail-closed decision: exit 2. Reason is a stable kebab-case
// word (uid-changed, key-active, source-conflict, ...); Detail is a
// content-free sentence for operators.
type Refused struct {
	Reason string
	Detail string
}

func (e *Refused) Error() string {
	if e.Detail == "" {
		return "refused: " + e.Reason
	}
	return fmt.Sprintf("refused: %s: %s", e.Reason, e.Detail)
}

// ReasonInterrupted is the reason of a run cut off after its operation
// became durable (a lost journal session, a dependency's failure after the
// preparation): the journal says where it stopped.
const ReasonInterrupted = "interrupted"

// Uncertain means the outcome of an authority call could not be settled from
// the durable facts within the bounded resolution: exit 75. Rerunning the
// same command resumes the operation and settles it.
type Uncertain struct {
	Reason string
	Err    error
}

func (e *Uncertain) Error() string {
	if e.Err == nil {
		return "outcome uncertain: " + e.Reason
	}
	return fmt.Sprintf("outcome uncertain: %s: %v", e.Reason, e.Err)
}

func (e *Uncertain) Unwrap() error { return e.Err }

// PermissionMismatch means the permission matrix did not hold exactly what
// the operation needs: exit 77, before the journal is opened.
type PermissionMismatch struct {
	// Mismatches name each check that failed, e.g. "secrets/keyring list: allowed, want denied".
	Mismatches []string
}

func (e *PermissionMismatch) Error() string {
	return "permission matrix mismatch: " + strings.Join(e.Mismatches, "; ")
}

// Unavailable means a dependency (PostgreSQL, the API server) could not be
// reached before any authority call was sent: exit 69.
type Unavailable struct {
	Dependency string
	Err        error
}

func (e *Unavailable) Error() string { return fmt.Sprintf("%s unavailable: %v", e.Dependency, e.Err) }
func (e *Unavailable) Unwrap() error { return e.Err }

// SettingError is an environment setting a family reads that is not valid
// (exit 64, before anything is contacted).
type SettingError struct {
	// Name is the environment variable.
	Name string
	Err  error
}

func (e *SettingError) Error() string { return e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }
