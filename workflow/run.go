package workflow

import (
	"slices"

	"github.com/keyledger/keyledger/store"
)

// Run is one operation as the engine drives it: the journaled operation and
// its records, kept in step with every committed transition.
type Run struct {
	Op      *store.Operation
	Records []store.Record
}

// LastCall returns the newest authority_call record.
func (r *Run) LastCall() (store.Record, bool) {
	for i := len(r.Records) - 1; i >= 0; i-- {
		if r.Records[i].Kind == store.RecordAuthorityCall {
			return r.Records[i], true
		}
	}
	return store.Record{}, false
}

// lastBatch is the number of the newest batch of calls (0 before any).
func (r *Run) lastBatch() int {
	if c, ok := r.LastCall(); ok {
		return c.Batch
	}
	return 0
}

// Settlement is what the journal says settled the newest call of one step
// on one target as done.
type Settlement struct {
	// Call is the newest authority_call record of the step on the target.
	Call store.Record
	// By is the record that settled it: its applied result, or an "ours"
	// resolution after its answer was lost.
	By store.Record
}

// Settled reports whether the newest call of step on target is settled as
// done: the newest answer or resolution after it is an applied result or an
// "ours" verdict. This is the one definition of settlement: the engine's
// (which calls are still open) and every family's (what is already done).
func (r *Run) Settled(step string, target store.Target) (Settlement, bool) {
	return settlement(r.Records, step, target)
}

// Settles reports whether r, an answer or a resolution, settles the call
// before it as done: an applied answer, or an "ours" resolution after its
// answer was lost. It is the rule Settled applies, and the one a family
// asks when it reads records one by one.
func Settles(r store.Record) bool {
	return AppliedResult(r) || r.Kind == store.RecordResolution && r.Status == Ours
}

// AppliedResult reports whether r is an answer the authority gave as
// applied.
func AppliedResult(r store.Record) bool {
	return r.Kind == store.RecordAuthorityResult && r.Status == Applied
}

func settlement(records []store.Record, step string, target store.Target) (Settlement, bool) {
	var s Settlement
	called, settled := false, false
	for _, rec := range records {
		if rec.Step != step || !rec.Target.Same(target) {
			continue
		}
		switch rec.Kind {
		case store.RecordAuthorityCall:
			s, called, settled = Settlement{Call: rec}, true, false
		case store.RecordAuthorityResult, store.RecordResolution:
			if called {
				s.By = rec
				settled = Settles(rec)
			}
		}
	}
	if !settled {
		return Settlement{}, false
	}
	return s, true
}

// batchCalls returns the calls of the newest batch in records, in order.
func batchCalls(records []store.Record, batch int) []store.Record {
	var calls []store.Record
	for _, c := range records {
		if c.Kind == store.RecordAuthorityCall && c.Batch == batch {
			calls = append(calls, c)
		}
	}
	return calls
}

// unsettled returns the calls of the newest batch that are not settled as
// done (Settled).
func (r *Run) unsettled() []store.Record {
	var open []store.Record
	for _, c := range batchCalls(r.Records, r.lastBatch()) {
		if _, ok := r.Settled(c.Step, c.Target); !ok {
			open = append(open, c)
		}
	}
	return open
}

// unanswered returns the calls of the newest batch with no answer recorded
// after them (left in calling: sent or not, nobody knows).
func (r *Run) unanswered() []store.Record {
	batch := r.lastBatch()
	var open []store.Record
	for i, c := range r.Records {
		if c.Kind != store.RecordAuthorityCall || c.Batch != batch {
			continue
		}
		answered := slices.ContainsFunc(r.Records[i+1:], func(later store.Record) bool {
			return later.Kind == store.RecordAuthorityResult && later.Step == c.Step && later.Target.Same(c.Target)
		})
		if !answered {
			open = append(open, c)
		}
	}
	return open
}

// callKey names a step on a target: sends are counted, and a batch's calls
// kept distinct, by it.
func callKey(step, target string) string { return step + " " + target }

// Attempts counts the authority calls recorded for step on target.
func (r *Run) Attempts(step string, target store.Target) int {
	n := 0
	for _, rec := range r.Records {
		if rec.Kind == store.RecordAuthorityCall && rec.Step == step && rec.Target.Same(target) {
			n++
		}
	}
	return n
}

// rejection returns the authority's rejection of call when the newest
// answer recorded for it (after it) says rejected.
func (r *Run) rejection(call store.Record) (store.Record, bool) {
	var found store.Record
	ok, after := false, false
	for _, rec := range r.Records {
		if rec.ID != 0 && rec.ID == call.ID || rec.ID == 0 && rec.Kind == call.Kind && rec.Step == call.Step && rec.Target.Same(call.Target) && rec.Attempt == call.Attempt {
			after = true
			continue
		}
		if after && rec.Kind == store.RecordAuthorityResult && rec.Step == call.Step && rec.Target.Same(call.Target) {
			found, ok = rec, rec.Status == Rejected
		}
	}
	return found, ok
}
