package store

import (
	"slices"

	"github.com/looplab/fsm"
)

// Event names one move of an operation's state machine. Its words are the
// engine's failpoint names ("after-"+event) and the journal's steps.
type Event string

// The machine's events.
const (
	// EventCall commits authority_call records; the calls are sent after.
	EventCall Event = "call"
	// EventAnswer commits the applied answers (or "ours" resolutions) of a
	// batch whose every call is settled.
	EventAnswer Event = "answer"
	// EventResolve commits answers of which at least one is unknown.
	EventResolve Event = "resolve"
	// EventComplete ends the operation with its effect confirmed.
	EventComplete Event = "complete"
	// EventRefuse ends the operation fail-closed.
	EventRefuse Event = "refuse"
	// EventNote appends records without moving the state (observations,
	// probes, a pipelined batch's later chunks).
	EventNote Event = "note"
)

// Events is the state machine, as looplab/fsm events: each event with the
// states it leaves from and the state it enters. It is the one definition
// of the journal's moves: Edges is derived from it, and one test checks
// keyledger.state_edges (migration 000001) and the diagram in
// workflow/README.md against it.
func Events() fsm.Events {
	live := []State{StatePrepared, StateCalling, StateAnswered, StateResolving}
	events := fsm.Events{
		{Name: string(EventCall), Src: names(StatePrepared, StateAnswered, StateResolving), Dst: string(StateCalling)},
		{Name: string(EventAnswer), Src: names(StateCalling, StateResolving), Dst: string(StateAnswered)},
		{Name: string(EventResolve), Src: names(StateCalling, StateAnswered), Dst: string(StateResolving)},
		{Name: string(EventComplete), Src: names(live...), Dst: string(StateCompleted)},
		{Name: string(EventRefuse), Src: names(live...), Dst: string(StateRefused)},
	}
	// A note leaves every live state for itself: one event per state, as
	// an fsm event has one destination.
	for _, s := range live {
		events = append(events, fsm.EventDesc{Name: string(EventNote), Src: names(s), Dst: string(s)})
	}
	return events
}

func names(states ...State) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

// Edge is one allowed move of an operation's state.
type Edge struct{ From, To State }

// Edges are the only moves of the state the journal accepts, derived from
// Events (a note, which stays in its state, is no edge); migration 000001
// repeats them in keyledger.state_edges and a trigger enforces them.
func Edges() []Edge {
	var edges []Edge
	for _, ev := range Events() {
		for _, src := range ev.Src {
			e := Edge{From: State(src), To: State(ev.Dst)}
			if e.From != e.To && !slices.Contains(edges, e) {
				edges = append(edges, e)
			}
		}
	}
	return edges
}

// EdgeEvent names the event that makes the move e ("" for none).
func EdgeEvent(e Edge) Event {
	for _, ev := range Events() {
		if ev.Dst == string(e.To) && slices.Contains(ev.Src, string(e.From)) {
			return Event(ev.Name)
		}
	}
	return ""
}

// Reachable reports whether the machine can go from one state to the
// other in zero or more moves: the journal only moves forward along
// Edges, so a state read back after another process moved the operation
// is always reachable from the one this process last saw.
func Reachable(from, to State) bool {
	seen := map[State]bool{from: true}
	queue := []State{from}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s == to {
			return true
		}
		for _, e := range Edges() {
			if e.From == s && !seen[e.To] {
				seen[e.To] = true
				queue = append(queue, e.To)
			}
		}
	}
	return false
}
