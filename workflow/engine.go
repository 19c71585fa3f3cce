package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/looplab/fsm"

	"github.com/keyledger/keyledger/store"
)

// Journal is what the engine needs from the store.
type Journal interface {
	Transition(ctx context.Context, p store.TransitionParams) (*store.Operation, error)
	// Snapshot reads an operation and its records as one consistent view.
	Snapshot(ctx context.Context, ns, mutationID string) (*store.Operation, []store.Record, error)
}

// engine drives operations of one family through the state machine.
type engine struct {
	// Journal holds the operation: its moves go through announcedJournal
	// only, which commits nothing the state machine did not announce.
	Journal *announcedJournal
	Family  Family
	Log     *slog.Logger
	// MaxAttempts bounds how many times one run sends the call of one step
	// and target (default 3); a rerun may send it again.
	MaxAttempts int
	// sender sends the calls (liveSender) or holds them back (DryRun).
	sender sender
	// ended is set once this engine committed the operation's terminal
	// move: an operation found terminal otherwise was ended by another
	// process (or another hand), which Operate does not take on trust.
	ended bool
	// applied is set once the operation's final call, sent by this run,
	// was answered applied: the write that makes the change is this
	// run's. wrote is set once any call this run sent was answered
	// applied. (runOutcome)
	applied, wrote bool
}

// newEngine is the engine of one run of plan on journal j.
func newEngine(j Journal, plan Plan, log *slog.Logger) *engine {
	e := &engine{Journal: &announcedJournal{Journal: j}, Family: plan.Family, Log: log, MaxAttempts: plan.MaxAttempts}
	e.sender = liveSender{e}
	return e
}

// move is the payload of one event: the records it commits and, for a
// terminal move, the outcome.
type move struct {
	records []store.Record
	outcome Outcome
	reason  string
}

// machine binds one operation's fsm (store.Events, the one definition of
// the journal's moves) to the journal: the before_event callback commits
// the move, and cancels the event when the commit fails, so the in-memory
// state never runs ahead of the journal. Every move, a note (records
// appended without moving the state) included, is an event of the fsm:
// the journal the machine holds refuses a transition the fsm did not
// announce (announcedJournal).
type machine struct {
	e   *engine
	run *Run
	fsm *fsm.FSM
	// sent counts this run's sends per step and target: MaxAttempts bounds
	// one run, so that a rerun after exit 75 can still settle the operation.
	sent map[string]int
	// next is the decision the family made for the answered state before
	// the answers it saw were committed (answerAhead): the next step
	// carries it out instead of asking again. A reload drops it.
	next *Decision
}

func (e *engine) newMachine(run *Run) *machine {
	m := &machine{e: e, run: run, sent: map[string]int{}}
	m.fsm = fsm.NewFSM(string(run.Op.State), store.Events(), fsm.Callbacks{
		"before_event": func(ctx context.Context, ev *fsm.Event) {
			mv := ev.Args[0].(move)
			p := store.TransitionParams{
				OperationID: run.Op.ID, From: store.State(ev.Src), To: store.State(ev.Dst), Revision: run.Op.Revision,
				Records: mv.records, Outcome: string(mv.outcome), Reason: mv.reason,
			}
			e.Journal.announced = &p
			op, err := e.Journal.Transition(ctx, p)
			if err != nil {
				ev.Cancel(err)
				return
			}
			run.Op = op
			run.Records = append(run.Records, journaled(op.Namespace, mv.records)...)
		},
	})
	return m
}

// journaled is records as the journal reads them back: each target in
// the operation's namespace, whatever namespace the family built it in.
func journaled(namespace string, records []store.Record) []store.Record {
	out := slices.Clone(records)
	for i := range out {
		out[i].Target, _ = out[i].Target.Journaled(namespace) // Transition refused any that does not read back
	}
	return out
}

// errUnannounced is a journal move the fsm did not announce: a bug.
var errUnannounced = errors.New("a journal move bypassed the state machine")

// announcedJournal is the only journal a machine moves: it commits the
// one transition the fsm's callback announced, exactly as announced, and
// refuses any other (errUnannounced).
type announcedJournal struct {
	Journal
	announced *store.TransitionParams
}

func (j *announcedJournal) Transition(ctx context.Context, p store.TransitionParams) (*store.Operation, error) {
	a := j.announced
	j.announced = nil
	if a == nil || a.OperationID != p.OperationID || a.From != p.From || a.To != p.To || a.Revision != p.Revision {
		return nil, fmt.Errorf("%w: %s -> %s", errUnannounced, p.From, p.To)
	}
	return j.Journal.Transition(ctx, p)
}

// fire commits one move, then runs the failpoint named after it (a note
// has none).
func (m *machine) fire(ctx context.Context, event store.Event, mv move) error {
	err := m.fsm.Event(ctx, string(event), mv)
	var canceled fsm.CanceledError
	var stayed fsm.NoTransitionError
	switch {
	case errors.As(err, &canceled) && canceled.Err != nil:
		return canceled.Err
	case errors.As(err, &stayed) && event == store.EventNote && stayed.Err == nil:
		return nil // a note stays in its state
	case err != nil:
		return fmt.Errorf("state machine event %s from %s: %w", event, m.fsm.Current(), err)
	}
	if m.run.Op.State.Terminal() {
		m.e.ended = true
	}
	m.e.Log.Debug("transition", "event", string(event), "state", m.fsm.Current(), "mutation_id", m.run.Op.MutationID)
	m.e.sender.moved(event)
	return nil
}

// note appends records without moving the state.
func (m *machine) note(ctx context.Context, records ...store.Record) error {
	return m.fire(ctx, store.EventNote, move{records: records})
}

// reload replaces the run's view with a consistent snapshot of the journal
// after another process moved the operation (store.ErrStateMoved), and
// sets the machine to the state read: the one place the fsm is set
// rather than moved, and only to a state the fsm's own edges reach from
// where it stood (the journal only moves forward).
func (m *machine) reload(ctx context.Context) error {
	run := m.run
	op, records, err := m.e.Journal.Snapshot(ctx, run.Op.Namespace, run.Op.MutationID)
	if err != nil {
		return fmt.Errorf("reloading operation: %w", err)
	}
	from := store.State(m.fsm.Current())
	if !store.Reachable(from, op.State) {
		return fmt.Errorf("reloading operation: the journal holds state %s, which the state machine cannot reach from %s", op.State, from)
	}
	run.Op, run.Records = op, records
	m.next = nil
	m.fsm.SetState(string(op.State))
	return nil
}

// drive runs the operation until it is terminal or its outcome is uncertain.
// A refused operation returns *Refused and an unsettled one *Uncertain.
func (e *engine) drive(ctx context.Context, run *Run) error {
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
			if err := m.reload(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if run.Op.State.Terminal() {
			if run.Op.State == store.StateRefused {
				return &Refused{Reason: run.Op.Reason}
			}
			return nil
		}
	}
}

// step makes one move from the current state.
func (m *machine) step(ctx context.Context) error {
	run := m.run
	state := store.State(m.fsm.Current())
	switch state {
	case store.StatePrepared, store.StateAnswered:
		if d := m.next; d != nil && state == store.StateAnswered {
			m.next = nil
			return m.decide(ctx, *d)
		}
		m.next = nil
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
		return m.fire(ctx, store.EventResolve, move{records: lost})
	case store.StateResolving:
		return m.resolve(ctx)
	case store.StateCompleted, store.StateRefused:
		return nil
	default:
		return fmt.Errorf("operation in unknown state %q", state)
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
		return m.complete(ctx, *d.Complete, slices.Clone(d.Notes))
	case d.Refuse != nil:
		return m.refuse(ctx, d.Refuse.Reason, d.Refuse.Summary, slices.Clone(d.Notes))
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
	records := append(slices.Clip(before), store.Record{
		Kind: store.RecordCompletion, Step: "complete", Status: store.Status(c.Outcome), Detail: c.Summary,
	})
	return m.fire(ctx, store.EventComplete, move{records: records, outcome: c.Outcome})
}

func (m *machine) refuse(ctx context.Context, reason string, summary store.Detail, before []store.Record) error {
	records := append(slices.Clip(before), store.Record{Kind: store.RecordRefusal, Step: "refuse", Reason: store.Reason(reason), Detail: summary})
	return m.fire(ctx, store.EventRefuse, move{records: records, outcome: OutcomeRefused, reason: reason})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
