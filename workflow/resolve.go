package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/keyledger/keyledger/store"
)

// resolve asks the family what the durable facts show for every call of
// the last batch whose outcome is not settled, and moves on from all the
// verdicts together: someone else's change refuses; an unreadable fact
// leaves the outcome uncertain; calls not applied are sent again (bounded);
// when every call is ours the batch is done.
func (m *machine) resolve(ctx context.Context) error {
	open := m.run.unsettled()
	if len(open) == 0 {
		return errors.New("resolving without an open call")
	}
	var (
		notes        []store.Record
		retries      []*Call
		theirs, last *Verdict
		undetermined *Verdict
		rejected     *store.Record
	)
	for _, call := range open {
		if r, ok := m.run.rejection(call); ok {
			// The authority refused this call of the batch: nothing to
			// re-read; the operation is refused once its siblings are settled.
			if rejected == nil {
				rejected = &r
			}
			continue
		}
		v, err := m.e.Family.Resolve(ctx, m.run, call)
		if err != nil {
			return err
		}
		detail := v.Detail
		if v.Kept && v.Kind == Ours {
			detail = store.Merge(store.DetailOf(KeptResolution{Kept: true}), v.Detail)
		}
		notes = append(notes, store.Record{
			Kind: store.RecordResolution, Step: call.Step, Target: call.Target, UID: v.UID, ResourceVersion: v.ResourceVersion,
			Digest: v.Digest, Status: string(v.Kind), Reason: v.Reason, Detail: detail,
		})
		switch v.Kind {
		case Ours:
		case Theirs:
			if theirs == nil {
				theirs = &v
			}
		case NotApplied:
			if v.Retry == nil {
				return errors.New("resolution found a call not applied but offered no retry")
			}
			retries = append(retries, v.Retry)
		default:
			if undetermined == nil {
				undetermined = &v
			}
		}
		last = &v
	}
	switch {
	case theirs != nil:
		summary := theirs.Summary
		if rejected != nil {
			var err error
			if summary, err = m.batchSummary(summary, notes); err != nil {
				return err
			}
		}
		return m.refuse(ctx, theirs.Reason, summary, notes)
	case undetermined != nil:
		if err := m.note(ctx, notes...); err != nil {
			return err
		}
		return &Uncertain{Reason: orDefault(undetermined.Reason, "undetermined"), Err: undetermined.Err}
	case rejected != nil:
		// Every sibling is settled (ours, or not applied and not sent
		// again): refuse, naming what the batch applied.
		code, err := store.DecodeDetail[struct {
			Code *int `json:"code"`
		}](rejected.Detail)
		if err != nil {
			return fmt.Errorf("reading the rejected result of %s %s: %w", rejected.Step, rejected.Target, err)
		}
		summary, err := m.batchSummary(store.DetailOf(rejectedCall{Rejected: rejected.Target, Code: code.Code}), notes)
		if err != nil {
			return err
		}
		return m.refuse(ctx, rejected.Reason, summary, notes)
	case len(retries) > 0:
		if asker, ok := m.e.Family.(Asker); ok {
			// A journaled call is sent again only when the family's
			// decision, made now, would make it.
			for _, r := range retries {
				why, read, err := asker.Asks(ctx, m.run, r)
				if err != nil {
					return err
				}
				notes = append(notes, read...)
				if why != "" {
					return m.refuse(ctx, ReasonCallNotAsked, store.DetailOf(callNotAsked{Step: r.Step, Target: r.Target.String(), Why: why}), notes)
				}
			}
		}
		for _, r := range retries {
			if m.sent[callKey(r.Step, r.Target.String())] >= m.e.MaxAttempts {
				if err := m.note(ctx, notes...); err != nil {
					return err
				}
				return &Uncertain{Reason: "attempts-exhausted", Err: fmt.Errorf("step %s %s not applied after %d attempts in this run", r.Step, r.Target.String(), m.e.MaxAttempts)}
			}
		}
		return m.calls(ctx, retries, notes...)
	}
	if len(open) == 1 && open[0].Final {
		return m.complete(ctx, Completion{Outcome: OutcomeConverged, Summary: last.Summary}, notes)
	}
	return m.fire(ctx, store.EventAnswer, move{records: notes})
}
