package workflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/keyledger/keyledger/store"
)

// ReasonAttemptLimit: a step and target of the operation was already sent
// store.MaxCallAttempt times over the operation's life; it is refused
// (exit 2) instead of journaling an attempt the journal cannot hold.
const ReasonAttemptLimit = "attempt-limit"

// sendConcurrency bounds the calls of one batch in flight at once.
const sendConcurrency = 32

// calls commits the records of a batch of calls (after notes) in one
// transition, sends the calls concurrently, and commits every answer in one
// transition: applied when all were applied, refused when the authority
// rejected one, resolving when any outcome is unknown. A batch of one is a
// single call, which may be final.
func (m *machine) calls(ctx context.Context, batch []*Call, notes ...store.Record) error {
	if err := m.e.sender.admit(ctx, batch); err != nil {
		return err
	}
	if refusal, err := m.checkBatch(batch); err != nil || refusal != nil {
		if err != nil {
			return err
		}
		return m.refuse(ctx, ReasonAttemptLimit, *refusal, notes)
	}
	answers, results, err := m.e.sender.deliver(ctx, m, batch, len(notes), m.callRecords(batch, notes))
	if err != nil {
		return err
	}
	return m.answered(ctx, batch, answers, results)
}

// checkBatch checks a batch before its records are journaled: an error
// for a batch the engine must never send (a final call in a batch, a call
// twice, one sent MaxAttempts times in this run), or the summary of an
// attempt-limit refusal.
func (m *machine) checkBatch(batch []*Call) (*store.Detail, error) {
	seen := map[string]bool{}
	for _, c := range batch {
		key := callKey(c.Step, c.Target.String())
		switch {
		case len(batch) > 1 && c.Final:
			return nil, errors.New("a final call cannot be sent in a batch")
		case seen[key]:
			return nil, fmt.Errorf("step %s %s appears twice in one batch", c.Step, c.Target.String())
		case m.sent[key] >= m.e.MaxAttempts:
			return nil, &Uncertain{Reason: "attempts-exhausted", Err: fmt.Errorf("step %s %s was sent %d times in this run", c.Step, c.Target.String(), m.sent[key])}
		}
		seen[key] = true
		if n := m.run.Attempts(c.Step, c.Target); n >= store.MaxCallAttempt {
			// The journal holds at most store.MaxCallAttempt attempts of a
			// step and target (a CHECK): refuse before the database would.
			d := store.DetailOf(attemptLimit{Step: c.Step, Target: c.Target.String(), Attempts: n})
			return &d, nil
		}
	}
	return nil, nil
}

// callRecords are notes, then the authority_call record of each call of
// the batch, numbered as the next batch.
func (m *machine) callRecords(batch []*Call, notes []store.Record) []store.Record {
	batchNo := m.run.lastBatch() + 1
	records := append([]store.Record{}, notes...)
	for _, c := range batch {
		// Attempt numbers count every send of this step and target over
		// the operation's life, across runs.
		records = append(records, store.Record{
			Kind: store.RecordAuthorityCall, Step: c.Step, Target: c.Target, Attempt: m.run.Attempts(c.Step, c.Target) + 1,
			UID: c.UID, ResourceVersion: c.ResourceVersion, Digest: c.Digest, Batch: batchNo, Final: c.Final, Detail: c.Detail,
		})
	}
	return records
}

// answered moves on from a batch's answers (results, their records not
// journaled yet): refused when the authority rejected a call and no
// answer is unknown, resolving when any is unknown, completed when a
// final call was applied, else answered.
func (m *machine) answered(ctx context.Context, batch []*Call, answers []Answer, results []store.Record) error {
	var rejected, unknown bool
	var rejection Answer
	var rejectedCall *Call
	for i, a := range answers {
		c := batch[i]
		switch a.Status {
		case Applied:
			m.e.sender.applied(c)
		case Rejected:
			if !rejected {
				rejected, rejection, rejectedCall = true, a, c
			}
		default:
			unknown = true
		}
	}
	switch {
	case rejected && !unknown:
		return m.refuseRejected(ctx, batch, rejectedCall.Summary, string(rejection.Reason), results)
	case unknown:
		// A rejected call among them refuses the operation only once every
		// sibling whose answer was lost is settled (see resolve).
		return m.fire(ctx, store.EventResolve, move{records: results})
	case len(batch) == 1 && batch[0].Final:
		summary := batch[0].Summary
		if !answers[0].Summary.IsZero() {
			summary = answers[0].Summary
		}
		return m.complete(ctx, Completion{Outcome: OutcomeCompleted, Summary: summary}, results)
	case m.e.sender.pipelines(batch):
		return m.answerAhead(ctx, results)
	default:
		return m.fire(ctx, store.EventAnswer, move{records: results})
	}
}

// refuseRejected refuses the operation whose call the authority rejected;
// a batch's refusal names what the batch applied.
func (m *machine) refuseRejected(ctx context.Context, batch []*Call, summary store.Detail, reason string, results []store.Record) error {
	if len(batch) > 1 {
		var err error
		if summary, err = m.batchSummary(summary, results); err != nil {
			return err
		}
	}
	return m.refuse(ctx, reason, summary, results)
}

// answerAhead ends a pipelined batch whose every call was applied, given
// the result records not journaled yet: the family's next decision is
// asked with them in view before they are committed (the view the
// answered state would show it). A decision to complete commits them with
// the completion, in one move from calling; any other decision is carried
// out in the answered state, once they are committed (machine.next),
// instead of being asked again.
func (m *machine) answerAhead(ctx context.Context, results []store.Record) error {
	view := &Run{Op: m.run.Op, Records: append(slices.Clip(m.run.Records), results...)}
	d, err := m.e.Family.Decide(ctx, view)
	if err == nil && d.Complete != nil && d.Refuse == nil && d.Call == nil && len(d.Calls) == 0 && d.End == nil {
		return m.complete(ctx, *d.Complete, append(slices.Clip(results), d.Notes...))
	}
	if ferr := m.fire(ctx, store.EventAnswer, move{records: results}); ferr != nil {
		return ferr
	}
	if err != nil {
		return err
	}
	m.next = &d
	return nil
}

// resultRecord is the authority_result record of call c answered a.
func resultRecord(c *Call, a Answer) store.Record {
	return store.Record{
		Kind: store.RecordAuthorityResult, Step: c.Step, Target: c.Target, UID: a.UID, ResourceVersion: a.ResourceVersion,
		Digest: a.Digest, Status: a.Status, Reason: a.Reason, Detail: withCode(a.Detail, a.Code),
	}
}

// send performs every call of a batch, at most sendConcurrency at once,
// and returns the answers in the batch's order.
func send(ctx context.Context, batch []*Call) []Answer {
	answers := make([]Answer, len(batch))
	Each(len(batch), sendConcurrency, func(i int) { answers[i] = batch[i].Send(ctx) })
	return answers
}

// Each runs fn(0) ... fn(n-1), at most limit at once, and returns when all
// have returned; a single index runs in the caller's goroutine.
func Each(n, limit int, fn func(i int)) {
	if n == 1 {
		fn(0)
		return
	}
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}

// batchSummary adds to summary the targets of the newest batch that were
// applied (an applied answer, or an "ours" resolution, including those in
// pending, not yet journaled), those settled by finding the result in
// place (a "kept" resolution: nothing was written) and those that were not:
// a refused batch names what it changed, and only that.
func (m *machine) batchSummary(summary store.Detail, pending []store.Record) (store.Detail, error) {
	records := append(append([]store.Record{}, m.run.Records...), pending...)
	done, kept, notDone := []string{}, []string{}, []string{}
	for _, c := range batchCalls(records, m.run.lastBatch()) {
		s, ok := settlement(records, c.Step, c.Target)
		var k KeptResolution
		if ok && s.By.Kind == store.RecordResolution {
			var err error
			if k, err = store.DecodeDetail[KeptResolution](s.By.Detail); err != nil {
				return store.Detail{}, fmt.Errorf("reading the resolution of %s %s: %w", c.Step, c.Target, err)
			}
		}
		switch {
		case k.Kept:
			kept = append(kept, c.Target.String())
		case ok:
			done = append(done, c.Target.String())
		default:
			notDone = append(notDone, c.Target.String())
		}
	}
	return store.Merge(summary, store.DetailOf(batchTargets{Applied: done, Kept: kept, NotApplied: notDone})), nil
}
