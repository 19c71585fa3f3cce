package app

import (
	"errors"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
)

// Exit codes (see the README's table).
const (
	ExitDone        = 0
	ExitInternal    = 1
	ExitRefused     = 2
	ExitUsage       = 64
	ExitUnavailable = 69
	ExitUncertain   = 75
	ExitPermission  = 77
)

// ExitCode maps an error from Run to the process exit code. This is the one
// place where outcomes become exit codes.
func ExitCode(err error) int {
	var (
		usage       *UsageError
		invalid     *command.InvalidError
		fileErr     *command.FileError
		refused     *workflow.Refused
		uncertain   *workflow.Uncertain
		permission  *workflow.PermissionMismatch
		unavailable *workflow.Unavailable
		unreachable *store.UnreachableError
	)
	switch {
	case err == nil:
		return ExitDone
	case errors.As(err, &usage), errors.As(err, &invalid), errors.As(err, &fileErr), errors.Is(err, store.ErrInvalidURL):
		return ExitUsage
	case errors.As(err, &permission):
		return ExitPermission
	case errors.As(err, &refused):
		return ExitRefused
	case errors.As(err, &uncertain):
		return ExitUncertain
	case errors.As(err, &unavailable), errors.As(err, &unreachable):
		return ExitUnavailable
	default:
		return ExitInternal
	}
}
