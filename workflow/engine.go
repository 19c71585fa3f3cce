package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/looplab/fsm"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/failpoint"
)

// Journal is what the engine needs from the store.
type Journal interface {
	Transition(ctx context.Context, p store.TransitionParams) (*store.Operation, error)
	// Snapshot reads an operation and its records as one consistent view.
	Snapshot(ctx context.Context, ns, mutationID string) (*store.Operation, []store.Record, error)
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
	// applied is set once the operation's final call, sent by this run,
	// was answered applied: the write that makes the change is this
	// run's. wrote is set once any call this run sent was answered
	// applied. (runOutcome)
	applied, wrote bool
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
	// next is the decision the family made for the answered state before
	// the answers it saw were committed (answerAhead): the next step
	// carries it out instead of asking again. A reload drops it.
	next *Decision
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
			m.next = nil
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
	op, records, err := e.Journal.Snapshot(ctx, run.Op.Namespace, run.Op.MutationID)
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
		if d := m.next; d != nil && run.Op.State == store.StateAnswered {
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
		Kind: store.RecordCompletion, Step: "complete", Status: string(c.Outcome), Detail: c.Summary,
	})
	return m.fire(ctx, eventComplete, move{records: records, outcome: c.Outcome})
}

func (m *machine) refuse(ctx context.Context, reason string, summary store.Detail, before []store.Record) error {
	records := append(slices.Clip(before), store.Record{Kind: store.RecordRefusal, Step: "refuse", Reason: reason, Detail: summary})
	return m.fire(ctx, eventRefuse, move{records: records, outcome: OutcomeRefused, reason: reason})
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
