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
	v, err := m.verdicts(ctx, open)
	if err != nil {
		return err
	}
	switch {
	case v.theirs != nil:
		summary := v.theirs.Summary
		if v.rejected != nil {
			if summary, err = m.batchSummary(summary, v.notes); err != nil {
				return err
			}
		}
		return m.refuse(ctx, string(v.theirs.Reason), summary, v.notes)
	case v.undetermined != nil:
		if err := m.note(ctx, v.notes...); err != nil {
			return err
		}
		return &Uncertain{Reason: orDefault(string(v.undetermined.Reason), "undetermined"), Err: v.undetermined.Err}
	case v.rejected != nil:
		return m.refuseBatch(ctx, *v.rejected, v.notes)
	case len(v.retries) > 0:
		return m.retry(ctx, v.retries, v.notes)
	}
	if len(open) == 1 && open[0].Final {
		return m.complete(ctx, Completion{Outcome: OutcomeConverged, Summary: v.last.Summary}, v.notes)
	}
	return m.fire(ctx, store.EventAnswer, move{records: v.notes})
}

// verdicts is what resolution found for the open calls of a batch.
type verdicts struct {
	// notes are the resolution records, one per call re-read.
	notes []store.Record
	// retries are the calls found not applied, to send again.
	retries []*Call
	// theirs, undetermined: the first such verdict; last, the last.
	theirs, undetermined, last *Verdict
	// rejected is the first call the authority rejected.
	rejected *store.Record
}

// verdicts asks the family to re-read the durable facts of each open call
// the authority did not reject.
func (m *machine) verdicts(ctx context.Context, open []store.Record) (verdicts, error) {
	var out verdicts
	for _, call := range open {
		if r, ok := m.run.rejection(call); ok {
			// The authority refused this call of the batch: nothing to
			// re-read; the operation is refused once its siblings are settled.
			if out.rejected == nil {
				out.rejected = &r
			}
			continue
		}
		v, err := m.e.Family.Resolve(ctx, m.run, call)
		if err != nil {
			return out, err
		}
		out.notes = append(out.notes, resolutionRecord(call, v))
		switch v.Kind {
		case Ours:
		case Theirs:
			if out.theirs == nil {
				out.theirs = &v
			}
		case NotApplied:
			if v.Retry == nil {
				return out, errors.New("resolution found a call not applied but offered no retry")
			}
			out.retries = append(out.retries, v.Retry)
		default:
			if out.undetermined == nil {
				out.undetermined = &v
			}
		}
		out.last = &v
	}
	return out, nil
}

// resolutionRecord is the resolution record of call found v.
func resolutionRecord(call store.Record, v Verdict) store.Record {
	detail := v.Detail
	if v.Kept && v.Kind == Ours {
		detail = store.Merge(store.DetailOf(KeptResolution{Kept: true}), v.Detail)
	}
	return store.Record{
		Kind: store.RecordResolution, Step: call.Step, Target: call.Target, UID: v.UID, ResourceVersion: v.ResourceVersion,
		Digest: v.Digest, Status: v.Kind, Reason: v.Reason, Detail: detail,
	}
}

// refuseBatch refuses a batch one of whose calls the authority rejected,
// once every sibling is settled (ours, or not applied and not sent
// again), naming what the batch applied.
func (m *machine) refuseBatch(ctx context.Context, rejected store.Record, notes []store.Record) error {
	code, err := store.DecodeDetail[struct {
		Code *int `json:"code"`
	}](rejected.Detail)
	if err != nil {
		return fmt.Errorf("reading the rejected result of %s %s: %w", rejected.Step, rejected.Target, err)
	}
	summary, err := m.batchSummary(store.DetailOf(rejectedCall{Rejected: rejected.Target.String(), Code: code.Code}), notes)
	if err != nil {
		return err
	}
	return m.refuse(ctx, string(rejected.Reason), summary, notes)
}

// retry sends again the calls resolution found not applied: only those
// the family's decision, made now, would make (Asker), and each at most
// MaxAttempts times in this run.
func (m *machine) retry(ctx context.Context, retries []*Call, notes []store.Record) error {
	if asker, ok := m.e.Family.(Asker); ok {
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
