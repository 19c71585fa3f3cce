package workflowtest

import (
	"errors"

	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
)

// Ending is how one run ended, in the one spelling every family's table
// uses: the outcome ("completed", "converged", "existing", ...),
// "refused/<reason>", "uncertain/<reason>", "unavailable/<dependency>",
// "invalid" (the command), or "error: <message>" for any other error;
// prefixed "replayed " when the run replayed a journaled ending, and
// followed by " (result says <outcome>)" when a refusal's or an
// uncertainty's Result names another outcome.
func Ending(res *workflow.Result, err error) string {
	var (
		refused     *workflow.Refused
		uncertain   *workflow.Uncertain
		unavailable *workflow.Unavailable
		invalid     *command.InvalidError
		out         string
	)
	switch {
	case errors.As(err, &refused):
		out = "refused/" + refused.Reason + disagreement(res, workflow.OutcomeRefused)
	case errors.As(err, &uncertain):
		out = "uncertain/" + uncertain.Reason + disagreement(res, workflow.OutcomeUncertain)
	case errors.As(err, &unavailable):
		out = "unavailable/" + unavailable.Dependency
	case errors.As(err, &invalid):
		out = "invalid"
	case err != nil:
		out = "error: " + err.Error()
	case res == nil:
		out = "error: no result"
	default:
		out = string(res.Outcome)
	}
	if res != nil && res.Replayed {
		out = "replayed " + out
	}
	return out
}

// disagreement is what a Result that names another outcome than want
// says; empty when it agrees (or there is none).
func disagreement(res *workflow.Result, want workflow.Outcome) string {
	if res == nil || res.Outcome == "" || res.Outcome == want {
		return ""
	}
	return " (result says " + string(res.Outcome) + ")"
}
