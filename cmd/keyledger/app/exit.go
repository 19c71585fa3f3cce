package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/keyledger/keyledger/cause"
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

// Outcome words of runs that ended without a journaled ending (stdout's
// contract lists them beside workflow's outcomes).
const (
	OutcomeInvalid     workflow.Outcome = "invalid"
	OutcomeUnavailable workflow.Outcome = "unavailable"
	OutcomeError       workflow.Outcome = "error"
)

// Reasons of failures that are not a family's refusal or uncertainty.
const (
	ReasonUsage              = "usage"
	ReasonInvalidCommand     = "invalid-command"
	ReasonInvalidDatabaseURL = "invalid-database-url"
	ReasonInvalidKubeconfig  = "invalid-kubeconfig"
	ReasonUnavailable        = "dependency-unavailable"
	ReasonPermission         = "permission-mismatch"
	ReasonInternal           = "internal-error"
)

// failure is what an error means to the user: the exit code, the outcome
// word and reason of a run's stdout line, a content-free message (no paths,
// no DSNs) and what to do about it.
type failure struct {
	Code    int
	Outcome workflow.Outcome
	Reason  string
	Message string
	Fix     string
}

// describe is the one place where errors become exit codes, outcome words,
// reasons and advice. The message never names a file: a path an error
// carries is replaced by "(file)".
func describe(err error) failure {
	f := classify(err)
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) && pathErr.Path != "" {
		f.Message = strings.ReplaceAll(f.Message, pathErr.Path, "(file)")
	}
	return f
}

func classify(err error) failure {
	var (
		usage        *UsageError
		setting      *workflow.SettingError
		storeSetting *store.SettingError
		kubeconfig   *KubeconfigError
		invalid      *command.InvalidError
		fileErr      *command.FileError
		refused      *workflow.Refused
		uncertain    *workflow.Uncertain
		permission   *workflow.PermissionMismatch
		unavailable  *workflow.Unavailable
		unreachable  *store.UnreachableError
		precondition *store.PreconditionError
	)
	switch {
	case err == nil:
		return failure{Code: ExitDone}
	case errors.As(err, &usage):
		return failure{Code: ExitUsage, Outcome: OutcomeInvalid, Reason: ReasonUsage, Message: usage.Msg,
			Fix: "see keyledger --help"}
	case errors.As(err, &setting):
		return failure{Code: ExitUsage, Outcome: OutcomeInvalid, Reason: ReasonUsage, Message: setting.Error(),
			Fix: "set " + setting.Name + " as docs/reference.md describes, or unset it"}
	case errors.As(err, &storeSetting):
		return failure{Code: ExitUsage, Outcome: OutcomeInvalid, Reason: ReasonUsage, Message: storeSetting.Error(),
			Fix: "set " + storeSetting.Name + " as docs/reference.md describes, or unset it"}
	case errors.As(err, &fileErr):
		// The message never carries the file's path.
		return failure{Code: ExitUsage, Outcome: OutcomeInvalid, Reason: ReasonInvalidCommand,
			Message: fileMessage(fileErr),
			Fix:     "pass the absolute path of a regular, readable command file of at most 64 KiB"}
	case errors.As(err, &invalid):
		return failure{Code: ExitUsage, Outcome: OutcomeInvalid, Reason: ReasonInvalidCommand, Message: err.Error(),
			Fix: "correct the named field of the command file and run it again"}
	case errors.As(err, &kubeconfig):
		return failure{Code: ExitUsage, Outcome: OutcomeInvalid, Reason: ReasonInvalidKubeconfig, Message: err.Error(),
			Fix: "pass --kubeconfig (or set KUBECONFIG) to a readable kubeconfig whose user has a token or a client certificate, or run in a cluster"}
	case errors.Is(err, store.ErrInvalidURL):
		return failure{Code: ExitUsage, Outcome: OutcomeInvalid, Reason: ReasonInvalidDatabaseURL, Message: err.Error(),
			Fix: "set --database-url or KEYLEDGER_DATABASE_URL to a postgres:// URL or a key=value connection string"}
	case errors.As(err, &precondition):
		code := ExitUsage
		switch {
		case precondition.Unavailable:
			code = ExitUnavailable
		case precondition.Permission:
			code = ExitPermission
		}
		return failure{Code: code, Outcome: OutcomeInvalid, Reason: precondition.Reason, Message: precondition.Msg, Fix: precondition.Fix}
	case errors.As(err, &permission):
		return failure{Code: ExitPermission, Outcome: workflow.OutcomeRefused, Reason: ReasonPermission, Message: err.Error(),
			Fix: "give the identity exactly the rights the operation needs (docs/reference.md, Using it), nothing more, then run again; PostgreSQL was not contacted"}
	case errors.As(err, &refused):
		return failure{Code: ExitRefused, Outcome: workflow.OutcomeRefused, Reason: refused.Reason, Message: err.Error(),
			Fix: "nothing more is sent for this operation; the reason (and keyledger journal show MUTATION_ID for a run) says what to change"}
	case errors.As(err, &uncertain):
		f := failure{Code: ExitUncertain, Outcome: workflow.OutcomeUncertain, Reason: uncertain.Reason, Message: err.Error(),
			Fix: "run the same command again: it resumes the operation and settles it"}
		if c, ok := cause.Of(err); ok && uncertain.Reason == workflow.ReasonInterrupted {
			// The operation is durable and unsettled: the cause says why,
			// and its fix comes before the rerun that settles it.
			f.Reason, f.Fix = c.Reason, afterDurable(c)
		}
		return f
	case errors.As(err, &unavailable):
		if c, ok := cause.Of(err); ok {
			return dependencyFailure(c, err)
		}
		return failure{Code: ExitUnavailable, Outcome: OutcomeUnavailable, Reason: ReasonUnavailable, Message: err.Error(),
			Fix: fixFor(unavailable.Dependency)}
	case errors.As(err, &unreachable):
		if c, ok := cause.Of(err); ok {
			return dependencyFailure(c, err)
		}
		return failure{Code: ExitUnavailable, Outcome: OutcomeUnavailable, Reason: ReasonUnavailable, Message: err.Error(),
			Fix: fixFor("postgresql")}
	default:
		if c, ok := cause.Of(err); ok {
			// A command that is not a run (journal list, show, grant,
			// history, ...) met a dependency's failure: nothing of it is
			// pending.
			return dependencyFailure(c, err)
		}
		return failure{Code: ExitInternal, Outcome: OutcomeError, Reason: ReasonInternal, Message: err.Error(),
			Fix: "this is a bug: keyledger journal show MUTATION_ID says where an operation stopped; report it with this line"}
	}
}

// dependencyFailure is a dependency's failure while nothing durable
// happened: exit 69, or 77 when the dependency refused a right the
// identity lacks (cause.Cause.Permission), with the cause's reason and fix.
func dependencyFailure(c cause.Cause, err error) failure {
	code := ExitUnavailable
	if c.Permission {
		code = ExitPermission
	}
	return failure{Code: code, Outcome: OutcomeUnavailable, Reason: c.Reason, Message: err.Error(), Fix: c.Fix}
}

// afterDurable is the fix of a dependency's failure after the operation
// became durable: the cause's fix, then the rerun that settles it (a cause
// a rerun settles by itself already ends with it).
func afterDurable(c cause.Cause) string {
	if c.Settles {
		return c.Fix
	}
	return c.Fix + "; once it is fixed, run the same command again: it resumes the operation and settles it"
}

// fileMessage describes a refused command file without its path.
func fileMessage(e *command.FileError) string {
	msg := "command file: " + e.Reason
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	var pathErr *fs.PathError
	switch {
	case errors.As(e.Err, &pathErr):
		msg += ": " + pathErr.Err.Error()
	case e.Err != nil:
		msg += ": " + e.Err.Error()
	}
	return msg
}

// scrubPaths replaces every path-like argument (or flag value) in msg.
func scrubPaths(msg string, args []string) string {
	for _, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			a = v
		}
		if len(a) > 1 && strings.ContainsAny(a[:1], "/.~") {
			msg = strings.ReplaceAll(msg, a, "(path)")
		}
	}
	return msg
}

func fixFor(dependency string) string {
	switch dependency {
	case "postgresql":
		return "check that PostgreSQL accepts connections at --database-url (or KEYLEDGER_DATABASE_URL), then run again"
	case "kubernetes":
		return "check --kubeconfig (or KUBECONFIG, ~/.kube/config, the in-cluster configuration) and that the API server answers, then run again"
	case "network":
		return "the network gate does not hold yet: wait for the NetworkPolicy to converge, then run again"
	default:
		return "check that " + dependency + " is reachable, then run again"
	}
}

// ExitCode maps an error from Run to the process exit code.
func ExitCode(err error) int { return describe(err).Code }

// reported marks an error whose one stderr line the command has already
// written (run and preflight log theirs as JSON lines).
type reported struct{ err error }

func (e *reported) Error() string { return e.err.Error() }
func (e *reported) Unwrap() error { return e.err }

// errorLine is the stderr line of a failed command in JSON mode.
type errorLine struct {
	Command  string `json:"command"`
	Error    string `json:"error"`
	Reason   string `json:"reason"`
	Fix      string `json:"fix"`
	ExitCode int    `json:"exitCode"`
}

// report writes the one stderr line of a failed command: what failed and
// what to do, as text or (jsonMode) as a JSON object. A path given as an
// argument (absolute, or starting with . or ~) never appears in it.
func report(w io.Writer, cmd string, err error, jsonMode bool, args ...string) {
	var done *reported
	if err == nil || errors.As(err, &done) {
		return
	}
	f := describe(err)
	if f.Reason == ReasonUsage && cmd != "" {
		f.Fix = "see keyledger " + cmd + " --help"
	}
	f.Message = strings.Join(strings.Fields(scrubPaths(f.Message, args)), " ")
	if jsonMode {
		b, _ := json.Marshal(errorLine{Command: cmd, Error: f.Message, Reason: f.Reason, Fix: f.Fix, ExitCode: f.Code})
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "%s: %s [%s, exit %d]; to fix: %s\n", strings.TrimSpace("keyledger "+cmd), f.Message, f.Reason, f.Code, f.Fix)
}
