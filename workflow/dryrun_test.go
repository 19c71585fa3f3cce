package workflow

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
)

// scriptFamily decides from the calls already settled in the run: the
// calls of script in order, the last one final.
type scriptFamily struct {
	script []string
	sent   *int
}

func (f scriptFamily) Decide(_ context.Context, run *Run) (Decision, error) {
	n := 0
	for _, s := range f.script {
		if run.Attempts(s, store.SecretTarget("", "x")) > 0 {
			n++
		}
	}
	if n == len(f.script) {
		return Decision{Complete: &Completion{Outcome: OutcomeCompleted}}, nil
	}
	step := f.script[n]
	return Decision{Call: &Call{Step: step, Verb: VerbDelete, Target: store.SecretTarget("", "x"), Final: n == len(f.script)-1, Summary: store.DetailOf(map[string]any{"step": step}),
		Send: func(context.Context) Answer { *f.sent++; return Answer{Status: Applied} }}}, nil
}

func (f scriptFamily) Resolve(context.Context, *Run, store.Record) (Verdict, error) {
	return Verdict{Kind: Undetermined}, nil
}

func (f scriptFamily) ConfirmReplay(context.Context, *Run) (*Contradiction, error) { return nil, nil }

// repeatFamily decides the same call forever: only its effect, which a dry
// run never has, would settle it.
type repeatFamily struct{ sent *int }

func (f repeatFamily) Decide(context.Context, *Run) (Decision, error) {
	return Decision{Call: &Call{Step: "wait-for-it", Target: store.SecretTarget("", "x"),
		Send: func(context.Context) Answer { *f.sent++; return Answer{Status: Applied} }}}, nil
}

func (f repeatFamily) Resolve(context.Context, *Run, store.Record) (Verdict, error) {
	return Verdict{Kind: Undetermined}, nil
}

func (f repeatFamily) ConfirmReplay(context.Context, *Run) (*Contradiction, error) { return nil, nil }

func dryEngine(f Family) (*engine, *Run) {
	run := &Run{Op: &store.Operation{MutationID: "m", State: store.StatePrepared},
		Records: []store.Record{{Kind: store.RecordPreparation, Step: "preparation"}}}
	e := newEngine(&dryJournal{run: run}, Plan{Family: f}, nil)
	e.sender = &dryCalls{}
	return e, run
}

// A dry run drives the same decisions with every call held back: the
// calls are recorded with planned results, nothing is sent, and the run
// ends as it would if each call were applied.
func TestDryRunSendsNothing(t *testing.T) {
	t.Parallel()
	sent := 0
	e, run := dryEngine(scriptFamily{script: []string{"create-a", "patch-b"}, sent: &sent})
	err := e.drive(context.WithValue(context.Background(), dryRunKey{}, true), run)
	require.NoError(t, err)
	require.Zero(t, sent, "no call was sent")
	require.Equal(t, store.StateCompleted, run.Op.State)
	var steps []string
	for _, r := range run.Records {
		switch r.Kind {
		case store.RecordAuthorityCall:
			steps = append(steps, r.Step)
		case store.RecordAuthorityResult:
			require.Equal(t, reasonPlanned, r.Reason)
		}
	}
	require.Equal(t, []string{"create-a", "patch-b"}, steps)
	res := &DryRunResult{Records: run.Records, verbs: e.sender.(*dryCalls).verbs}
	for _, c := range res.Calls() {
		require.Equal(t, VerbDelete, res.Verb(c), "the verb is the call's, not its step name's (%s)", c.Step)
	}
}

// A family that decides the same call again needs that call's effect: the
// dry run stops there instead of looping or sending.
func TestDryRunStopsOnARepeatedCall(t *testing.T) {
	t.Parallel()
	sent := 0
	e, run := dryEngine(repeatFamily{sent: &sent})
	err := e.drive(context.Background(), run)
	var stop *planStop
	require.ErrorAs(t, err, &stop)
	require.Zero(t, sent)
	require.Equal(t, 1, run.Attempts("wait-for-it", store.SecretTarget("", "x")), "the call is planned once")
}
