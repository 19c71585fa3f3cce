package workflow

import (
	"context"
	"errors"
	"strings"

	"github.com/keyledger/keyledger/store"
)

// ReplayPrefix begins the reason of every refusal of a replay the cluster
// contradicts (replay-receipt-missing, replay-uid-changed, ...).
const ReplayPrefix = "replay-"

// Contradiction is what a family found when the cluster does not show the
// effect the journal says a completed operation had: the journal is not
// believed, and the run refuses with Reason (exit 2), writing nothing to
// the API server and appending nothing to the journal.
type Contradiction struct {
	// Reason is a stable kebab-case word naming what differs; the engine
	// makes it begin with ReplayPrefix.
	Reason string
	// Detail is a content-free sentence for operators: what the read
	// showed against what the journal says (names, UIDs, versions, never
	// values).
	Detail string
}

// reason is the refusal's reason: Reason, beginning with ReplayPrefix.
func (c *Contradiction) reason() string {
	r := c.Reason
	if r == "" {
		r = "contradicted"
	}
	if !strings.HasPrefix(r, ReplayPrefix) {
		r = ReplayPrefix + r
	}
	return r
}

// confirmReplay asks the family whether the cluster shows the effect of
// the completed operation in run, read in this run. It returns nil when
// it does, *Refused with the contradiction's reason when it does not, and
// *Unavailable when the read failed: a replay is never believed on the
// journal's word alone. Only completed operations are confirmed: a refused
// one claims no effect, and its replay refuses again.
func confirmReplay(ctx context.Context, f Family, run *Run) error {
	if run.Op.State != store.StateCompleted {
		return nil
	}
	c, err := f.ConfirmReplay(ctx, run)
	if err != nil {
		var unavailable *Unavailable
		if errors.As(err, &unavailable) {
			return err
		}
		return &Unavailable{Dependency: "kubernetes", Err: err}
	}
	if c == nil {
		return nil
	}
	detail := c.Detail
	if detail == "" {
		detail = "the journal says this operation completed, but the cluster does not show its effect"
	}
	return &Refused{Reason: c.reason(), Detail: detail}
}
