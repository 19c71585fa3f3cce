package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/looplab/fsm"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/failpoint"
)

// Journal is what the engine needs from the store.
type Journal interface {
	Transition(ctx context.Context, p store.TransitionParams) (*store.Operation, error)
	// Snapshot reads an operation and its records as one consistent view.
	Snapshot(ctx context.Context, mutationID string) (*store.Operation, []store.Record, error)
}

// Family is one kind of operation plugged into the engine.
type Family interface {
	// Decide reads the durable facts and says what to do next. It is asked in
	// the prepared and answered states.
	Decide(ctx context.Context, run *Run) (Decision, error)
	// Resolve re-reads the durable facts after the call recorded in call
	// (an authority_call record) ended without a known outcome.
	Resolve(ctx context.Context, run *Run, call store.Record) (Verdict, error)
	// ConfirmReplay is asked before an operation the journal says completed
	// is reported as a replay (existing): it reads the cluster in this run,
	// with the rights the family already holds (nothing beyond its Rules and
	// Access), and returns nil when the cluster shows the effect the
	// journal says the operation had, a *Contradiction naming what differs
	// when it does not, and an error when the read failed (the run is then
	// unavailable, never existing). It must only read: it is asked by
	// `keyledger plan` too. A journal is far easier to write than the
	// objects it describes, so a replay is believed only with the cluster's
	// agreement.
	ConfirmReplay(ctx context.Context, run *Run) (*Contradiction, error)
}

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
func (r *Run) Settled(step, target string) (Settlement, bool) {
	return settlement(r.Records, step, target)
}

func settlement(records []store.Record, step, target string) (Settlement, bool) {
	var s Settlement
	called, settled := false, false
	for _, rec := range records {
		if rec.Step != step || rec.Target != target {
			continue
		}
		switch rec.Kind {
		case store.RecordAuthorityCall:
			s, called, settled = Settlement{Call: rec}, true, false
		case store.RecordAuthorityResult, store.RecordResolution:
			if called {
				s.By = rec
				settled = rec.Kind == store.RecordAuthorityResult && rec.Status == string(Applied) ||
					rec.Kind == store.RecordResolution && rec.Status == string(Ours)
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
			return later.Kind == store.RecordAuthorityResult && later.Step == c.Step && later.Target == c.Target
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
func (r *Run) Attempts(step, target string) int {
	n := 0
	for _, rec := range r.Records {
		if rec.Kind == store.RecordAuthorityCall && rec.Step == step && rec.Target == target {
			n++
		}
	}
	return n
}

// Decision is what Decide returns: exactly one of Complete, Refuse, Call,
// Calls or End, or only Notes.
type Decision struct {
	// Notes are records appended before the decision takes effect (for
	// example probe outcomes). Notes alone append without moving the state,
	// and the engine asks Decide again.
	Notes []store.Record
	// End ends the run with this error (an *Uncertain or *Unavailable)
	// once Notes are journaled, without moving the state: what the
	// decision learned is kept, and a rerun decides again from it.
	End error
	// Complete ends the operation as done (for example an exact replay).
	Complete *Completion
	// Refuse ends the operation fail-closed.
	Refuse *Refusal
	// Call sends one authority call.
	Call *Call
	// Calls sends a batch of independent, non-final calls: their records
	// are committed in one transaction, they are sent concurrently, and
	// their answers are committed in one transaction.
	Calls []*Call
}

// Completion ends an operation with its effect confirmed.
type Completion struct {
	Outcome Outcome
	// Records are appended before the completion record (observations).
	Records []store.Record
	// Summary is the content-free description of the result stored in the
	// completion record and printed in the outcome line.
	Summary map[string]any
}

// Refusal ends an operation fail-closed.
type Refusal struct {
	// Reason is a stable kebab-case word.
	Reason string
	// Summary is what was observed, content-free, stored in the refusal
	// record and printed in the outcome line.
	Summary map[string]any
	Records []store.Record
}

// Call is one authority call. Its record is committed before Send runs.
type Call struct {
	// Step names the call in the journal (kebab-case, e.g. "replace-keyring").
	Step string
	// Target names the object the call acts on when one step acts on
	// several (e.g. "secret/db"); attempts are counted per step and target.
	Target string
	// UID and ResourceVersion are the call's preconditions; Digest the
	// digest of the intended result.
	UID, ResourceVersion, Digest string
	// Detail holds content-free facts about the call.
	Detail map[string]any
	// Observation, when set, is committed with the call (what the read that
	// led to it showed).
	Observation *store.Record
	// Final marks the last call: when it is applied the operation completes
	// with outcome completed and Summary.
	Final bool
	// Summary describes the intended result (content-free); it becomes the
	// completion's summary when a Final call is applied, and the refusal's
	// when the authority rejects the call.
	Summary map[string]any
	// Send performs the call. It must classify every answer and never retry.
	Send func(ctx context.Context) Answer
}

// AnswerStatus classifies what came back for a call.
type AnswerStatus string

const (
	// Applied: the authority answered and the result is what was intended.
	Applied AnswerStatus = "applied"
	// Unknown: no usable answer (lost response, reset, timeout, 5xx) or a
	// conflict; the durable facts must be re-read.
	Unknown AnswerStatus = "unknown"
	// Rejected: the authority definitely refused and nothing was applied.
	Rejected AnswerStatus = "rejected"
)

// Answer is what a call's Send saw.
type Answer struct {
	Status AnswerStatus
	// Code is the HTTP status, 0 when none arrived.
	Code int
	// UID, ResourceVersion and Digest describe the returned object.
	UID, ResourceVersion, Digest string
	// Reason is a kebab-case word (conflict, lost, timeout, server-error, ...).
	Reason string
	Detail map[string]any
	// Summary, when set on the applied answer of a Final call, replaces the
	// call's Summary as the completion's: what only the answer knows (the
	// UID of a created object).
	Summary map[string]any
}

// VerdictKind is what resolution concluded.
type VerdictKind string

const (
	// Ours: the durable facts show this operation's intended result.
	Ours VerdictKind = "ours"
	// NotApplied: the call did not take effect; Retry may be sent again.
	NotApplied VerdictKind = "not-applied"
	// Theirs: something else changed the object; fail closed.
	Theirs VerdictKind = "theirs"
	// Undetermined: the facts could not be read; the outcome stays unknown.
	Undetermined VerdictKind = "undetermined"
)

// Verdict is what Resolve returns.
type Verdict struct {
	Kind   VerdictKind
	Reason string
	// UID, ResourceVersion and Digest describe what the re-read showed.
	UID, ResourceVersion, Digest string
	Detail                       map[string]any
	// Retry is the call to send when Kind is NotApplied (same step).
	Retry *Call
	// Summary describes what was found (content-free): the completion's
	// summary when Kind is Ours and the call was final, the refusal's when
	// Kind is Theirs.
	Summary map[string]any
	// Err explains an Undetermined verdict.
	Err error
	// Kept marks an Ours verdict whose intended result was found in place,
	// not written by this operation (a create-if-absent that found the
	// object): the resolution record says so ("kept" in its detail), and a
	// refused batch lists the target as kept, never as applied.
	Kept bool
}

// Engine drives operations of one family through the state machine.
type Engine struct {
	Journal Journal
	Family  Family
	Log     *slog.Logger
	// MaxAttempts bounds how many times one run sends the call of one step
	// and target (default 3); a rerun may send it again.
	MaxAttempts int
	// dry, when set, holds every call back (DryRun).
	dry *dryCalls
	// ended is set once this engine committed the operation's terminal
	// move: an operation found terminal otherwise was ended by another
	// process (or another hand), which Operate does not take on trust.
	ended bool
}

// The engine's events. Their names are also the failpoint names
// ("after-"+event) and the words the journal's records use.
const (
	eventCall     = "call"
	eventAnswer   = "answer"
	eventResolve  = "resolve"
	eventComplete = "complete"
	eventRefuse   = "refuse"
)

// Events is the state machine: each event with the states it leaves from and
// the state it enters. It is exactly store.Edges, grouped by destination.
func Events() fsm.Events {
	s := func(states ...store.State) []string {
		out := make([]string, len(states))
		for i, st := range states {
			out[i] = string(st)
		}
		return out
	}
	return fsm.Events{
		{Name: eventCall, Src: s(store.StatePrepared, store.StateAnswered, store.StateResolving), Dst: string(store.StateCalling)},
		{Name: eventAnswer, Src: s(store.StateCalling, store.StateResolving), Dst: string(store.StateAnswered)},
		{Name: eventResolve, Src: s(store.StateCalling, store.StateAnswered), Dst: string(store.StateResolving)},
		{Name: eventComplete, Src: s(store.StatePrepared, store.StateCalling, store.StateAnswered, store.StateResolving), Dst: string(store.StateCompleted)},
		{Name: eventRefuse, Src: s(store.StatePrepared, store.StateCalling, store.StateAnswered, store.StateResolving), Dst: string(store.StateRefused)},
	}
}

// move is the payload of one transition.
type move struct {
	records []store.Record
	outcome Outcome
	reason  string
}

// machine binds one operation's fsm to the journal: the before_event
// callback commits the transition, and cancels the event when the commit
// fails, so the in-memory state never runs ahead of the journal.
type machine struct {
	e   *Engine
	run *Run
	fsm *fsm.FSM
	// sent counts this run's sends per step and target: MaxAttempts bounds
	// one run, so that a rerun after exit 75 can still settle the operation.
	sent map[string]int
}

func (e *Engine) newMachine(run *Run) *machine {
	m := &machine{e: e, run: run, sent: map[string]int{}}
	m.fsm = fsm.NewFSM(string(run.Op.State), Events(), fsm.Callbacks{
		"before_event": func(ctx context.Context, ev *fsm.Event) {
			mv := ev.Args[0].(move)
			op, err := e.Journal.Transition(ctx, store.TransitionParams{
				OperationID: run.Op.ID,
				From:        store.State(ev.Src),
				To:          store.State(ev.Dst),
				Revision:    run.Op.Revision,
				Records:     mv.records,
				Outcome:     string(mv.outcome),
				Reason:      mv.reason,
			})
			if err != nil {
				ev.Cancel(err)
				return
			}
			run.Op = op
			run.Records = append(run.Records, mv.records...)
		},
	})
	return m
}

// fire commits one transition, then runs the failpoint named after it.
func (m *machine) fire(ctx context.Context, event string, mv move) error {
	if err := m.fsm.Event(ctx, event, mv); err != nil {
		var canceled fsm.CanceledError
		if errors.As(err, &canceled) && canceled.Err != nil {
			return canceled.Err
		}
		return fmt.Errorf("state machine event %s from %s: %w", event, m.fsm.Current(), err)
	}
	if m.run.Op.State.Terminal() {
		m.e.ended = true
	}
	m.e.Log.Debug("transition", "event", event, "state", m.fsm.Current(), "mutation_id", m.run.Op.MutationID)
	if m.e.dry == nil {
		failpoint.Hit("after-" + event)
	}
	return nil
}

// Drive runs the operation until it is terminal or its outcome is uncertain.
// It returns the final operation; a refused operation returns *Refused and an
// unsettled one *Uncertain.
func (e *Engine) Drive(ctx context.Context, run *Run) (*Run, error) {
	if e.MaxAttempts <= 0 {
		e.MaxAttempts = 3
	}
	if e.Log == nil {
		e.Log = slog.New(slog.DiscardHandler)
	}
	m := e.newMachine(run)
	for {
		err := m.step(ctx)
		if errors.Is(err, store.ErrStateMoved) {
			// Another process moved this operation: reload the journal and
			// continue from what it recorded.
			if err := e.reload(ctx, run); err != nil {
				return run, err
			}
			m.fsm.SetState(string(run.Op.State))
			continue
		}
		if err != nil {
			return run, err
		}
		if run.Op.State.Terminal() {
			if run.Op.State == store.StateRefused {
				return run, &Refused{Reason: run.Op.Reason}
			}
			return run, nil
		}
	}
}

// reload replaces the run's view with a consistent snapshot of the journal:
// an operation read apart from its records could pair a state with records
// another process appended after it.
func (e *Engine) reload(ctx context.Context, run *Run) error {
	op, records, err := e.Journal.Snapshot(ctx, run.Op.MutationID)
	if err != nil {
		return fmt.Errorf("reloading operation: %w", err)
	}
	run.Op, run.Records = op, records
	return nil
}

// step makes one move from the current state.
func (m *machine) step(ctx context.Context) error {
	run := m.run
	switch run.Op.State {
	case store.StatePrepared, store.StateAnswered:
		d, err := m.e.Family.Decide(ctx, run)
		if err != nil {
			return err
		}
		return m.decide(ctx, d)
	case store.StateCalling:
		// Found on resume, or left by a concurrent run: the calls may have
		// been sent. Never re-send blindly: resolve from durable facts.
		var lost []store.Record
		for _, c := range m.run.unanswered() {
			lost = append(lost, store.Record{Kind: store.RecordAuthorityResult, Step: c.Step, Target: c.Target,
				Status: "lost", Reason: "no-result-recorded"})
		}
		if len(lost) == 0 {
			lost = []store.Record{{Kind: store.RecordAuthorityResult, Step: "unknown", Status: "lost", Reason: "no-result-recorded"}}
		}
		return m.fire(ctx, eventResolve, move{records: lost})
	case store.StateResolving:
		return m.resolve(ctx)
	case store.StateCompleted, store.StateRefused:
		return nil
	default:
		return fmt.Errorf("operation in unknown state %q", run.Op.State)
	}
}

func (m *machine) decide(ctx context.Context, d Decision) error {
	acts := 0
	for _, set := range []bool{d.Complete != nil, d.Refuse != nil, d.Call != nil, len(d.Calls) > 0, d.End != nil} {
		if set {
			acts++
		}
	}
	if acts > 1 {
		return errors.New("family decided more than one thing at once")
	}
	switch {
	case d.End != nil:
		if len(d.Notes) > 0 {
			if err := m.note(ctx, d.Notes...); err != nil {
				return err
			}
		}
		return d.End
	case d.Complete != nil:
		c := *d.Complete
		c.Records = append(append([]store.Record{}, d.Notes...), c.Records...)
		return m.complete(ctx, c, nil)
	case d.Refuse != nil:
		return m.refuse(ctx, d.Refuse.Reason, d.Refuse.Summary, append(append([]store.Record{}, d.Notes...), d.Refuse.Records...))
	case d.Call != nil:
		return m.calls(ctx, []*Call{d.Call}, d.Notes...)
	case len(d.Calls) > 0:
		return m.calls(ctx, d.Calls, d.Notes...)
	case len(d.Notes) > 0:
		return m.note(ctx, d.Notes...)
	default:
		return errors.New("family decided nothing")
	}
}

func (m *machine) complete(ctx context.Context, c Completion, before []store.Record) error {
	records := append(append(before, c.Records...), store.Record{
		Kind: store.RecordCompletion, Step: "complete", Status: string(c.Outcome), Detail: c.Summary,
	})
	return m.fire(ctx, eventComplete, move{records: records, outcome: c.Outcome})
}

func (m *machine) refuse(ctx context.Context, reason string, summary map[string]any, before []store.Record) error {
	records := append(slices.Clip(before), store.Record{Kind: store.RecordRefusal, Step: "refuse", Reason: reason, Detail: summary})
	return m.fire(ctx, eventRefuse, move{records: records, outcome: OutcomeRefused, reason: reason})
}

// ReasonAttemptLimit: a step and target of the operation was already sent
// store.MaxCallAttempt times over the operation's life; it is refused
// (exit 2) instead of journaling an attempt the journal cannot hold.
const ReasonAttemptLimit = "attempt-limit"

// sendConcurrency bounds the calls of one batch in flight at once.
const sendConcurrency = 16

// calls commits the records of a batch of calls (after notes) in one
// transition, sends the calls concurrently, and commits every answer in one
// transition: applied when all were applied, refused when the authority
// rejected one, resolving when any outcome is unknown. A batch of one is a
// single call, which may be final.
func (m *machine) calls(ctx context.Context, batch []*Call, notes ...store.Record) error {
	var planned []Answer
	if m.e.dry != nil {
		// A dry run: nothing is sent; stop before recording a call decided
		// twice.
		var err error
		if planned, err = m.e.dry.answer(ctx, batch); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for _, c := range batch {
		key := callKey(c.Step, c.Target)
		switch {
		case len(batch) > 1 && c.Final:
			return errors.New("a final call cannot be sent in a batch")
		case seen[key]:
			return fmt.Errorf("step %s %s appears twice in one batch", c.Step, c.Target)
		case m.sent[key] >= m.e.MaxAttempts:
			return &Uncertain{Reason: "attempts-exhausted", Err: fmt.Errorf("step %s %s was sent %d times in this run", c.Step, c.Target, m.sent[key])}
		}
		seen[key] = true
		if n := m.run.Attempts(c.Step, c.Target); n >= store.MaxCallAttempt {
			// The journal holds at most store.MaxCallAttempt attempts of a
			// step and target (a CHECK): refuse before the database would.
			return m.refuse(ctx, ReasonAttemptLimit, map[string]any{"step": c.Step, "target": c.Target, "attempts": n}, notes)
		}
	}
	batchNo := m.run.lastBatch() + 1
	records := append([]store.Record{}, notes...)
	for _, c := range batch {
		m.sent[callKey(c.Step, c.Target)]++
		if c.Observation != nil {
			records = append(records, *c.Observation)
		}
		// Attempt numbers count every send of this step and target over
		// the operation's life, across runs.
		records = append(records, store.Record{
			Kind: store.RecordAuthorityCall, Step: c.Step, Target: c.Target, Attempt: m.run.Attempts(c.Step, c.Target) + 1,
			UID: c.UID, ResourceVersion: c.ResourceVersion, Digest: c.Digest, Batch: batchNo, Final: c.Final, Detail: c.Detail,
		})
	}
	if err := m.fire(ctx, eventCall, move{records: records}); err != nil {
		return err
	}
	answers := planned
	if m.e.dry == nil {
		answers = send(ctx, batch)
		failpoint.Hit("after-send")
	}

	results := make([]store.Record, len(batch))
	var rejected, unknown bool
	var rejection Answer
	var rejectedCall *Call
	for i, a := range answers {
		c := batch[i]
		results[i] = store.Record{
			Kind: store.RecordAuthorityResult, Step: c.Step, Target: c.Target, UID: a.UID, ResourceVersion: a.ResourceVersion,
			Digest: a.Digest, Status: string(a.Status), Reason: a.Reason, Detail: withCode(a.Detail, a.Code),
		}
		switch a.Status {
		case Applied:
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
		summary := rejectedCall.Summary
		if len(batch) > 1 {
			summary = m.batchSummary(summary, results)
		}
		return m.refuse(ctx, rejection.Reason, summary, results)
	case unknown:
		// A rejected call among them refuses the operation only once every
		// sibling whose answer was lost is settled (see resolve).
		return m.fire(ctx, eventResolve, move{records: results})
	case len(batch) == 1 && batch[0].Final:
		summary := batch[0].Summary
		if answers[0].Summary != nil {
			summary = answers[0].Summary
		}
		return m.complete(ctx, Completion{Outcome: OutcomeCompleted, Summary: summary}, results)
	default:
		return m.fire(ctx, eventAnswer, move{records: results})
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

func withCode(detail map[string]any, code int) map[string]any {
	if code == 0 {
		return detail
	}
	out := map[string]any{"code": code}
	for k, v := range detail {
		out[k] = v
	}
	return out
}

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
			detail = map[string]any{"kept": true}
			for k, val := range v.Detail {
				detail[k] = val
			}
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
			summary = m.batchSummary(summary, notes)
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
		summary := m.batchSummary(map[string]any{"rejected": rejected.Target, "code": rejected.Detail["code"]}, notes)
		return m.refuse(ctx, rejected.Reason, summary, notes)
	case len(retries) > 0:
		for _, r := range retries {
			if m.sent[callKey(r.Step, r.Target)] >= m.e.MaxAttempts {
				if err := m.note(ctx, notes...); err != nil {
					return err
				}
				return &Uncertain{Reason: "attempts-exhausted", Err: fmt.Errorf("step %s %s not applied after %d attempts in this run", r.Step, r.Target, m.e.MaxAttempts)}
			}
		}
		return m.calls(ctx, retries, notes...)
	}
	if len(open) == 1 && open[0].Final {
		return m.complete(ctx, Completion{Outcome: OutcomeConverged, Summary: last.Summary}, notes)
	}
	return m.fire(ctx, eventAnswer, move{records: notes})
}

// rejection returns the authority's rejection of call when the newest
// answer recorded for it (after it) says rejected.
func (r *Run) rejection(call store.Record) (store.Record, bool) {
	var found store.Record
	ok, after := false, false
	for _, rec := range r.Records {
		if rec.ID != 0 && rec.ID == call.ID || rec.ID == 0 && rec.Kind == call.Kind && rec.Step == call.Step && rec.Target == call.Target && rec.Attempt == call.Attempt {
			after = true
			continue
		}
		if after && rec.Kind == store.RecordAuthorityResult && rec.Step == call.Step && rec.Target == call.Target {
			found, ok = rec, rec.Status == string(Rejected)
		}
	}
	return found, ok
}

// batchSummary adds to summary the targets of the newest batch that were
// applied (an applied answer, or an "ours" resolution, including those in
// pending, not yet journaled), those settled by finding the result in
// place (a "kept" resolution: nothing was written) and those that were not:
// a refused batch names what it changed, and only that.
func (m *machine) batchSummary(summary map[string]any, pending []store.Record) map[string]any {
	records := append(append([]store.Record{}, m.run.Records...), pending...)
	out := map[string]any{}
	for k, v := range summary {
		out[k] = v
	}
	done, kept, notDone := []string{}, []string{}, []string{}
	for _, c := range batchCalls(records, m.run.lastBatch()) {
		s, ok := settlement(records, c.Step, c.Target)
		switch {
		case ok && s.By.Kind == store.RecordResolution && s.By.Detail["kept"] == true:
			kept = append(kept, c.Target)
		case ok:
			done = append(done, c.Target)
		default:
			notDone = append(notDone, c.Target)
		}
	}
	out["applied"], out["kept"], out["notApplied"] = done, kept, notDone
	return out
}

// note appends records without moving the state.
func (m *machine) note(ctx context.Context, records ...store.Record) error {
	op, err := m.e.Journal.Transition(ctx, store.TransitionParams{
		OperationID: m.run.Op.ID, From: m.run.Op.State, To: m.run.Op.State, Revision: m.run.Op.Revision, Records: records,
	})
	if err != nil {
		return err
	}
	m.run.Op = op
	m.run.Records = append(m.run.Records, records...)
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
