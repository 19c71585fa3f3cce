package workflow

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
)

func preparedRun() *Run {
	return &Run{Op: &store.Operation{ID: 1, MutationID: "m", State: store.StatePrepared},
		Records: []store.Record{{Kind: store.RecordPreparation, Step: "preparation"}}}
}

// The engine's journal commits only what the state machine announced: a
// move made beside the fsm (a note or a chunk written straight to the
// journal, as the engine once did) is refused and changes nothing, while
// the same records appended through the fsm's note event are committed.
func TestAJournalMoveOutsideTheStateMachineIsRefused(t *testing.T) {
	t.Parallel()
	run := preparedRun()
	e := newEngine(&dryJournal{run: run}, Plan{Family: scriptFamily{}}, nil)
	m := e.newMachine(run)
	obs := store.Record{Kind: store.RecordObservation, Step: "read-secret", Target: store.SecretTarget("", "x")}

	_, err := e.Journal.Transition(context.Background(), store.TransitionParams{
		OperationID: run.Op.ID, From: run.Op.State, To: run.Op.State, Revision: run.Op.Revision, Records: []store.Record{obs},
	})
	require.ErrorIs(t, err, errUnannounced)
	require.Len(t, run.Records, 1, "nothing was appended")

	require.NoError(t, m.note(context.Background(), obs))
	require.Equal(t, store.StatePrepared, run.Op.State)
	require.Equal(t, int64(1), run.Op.Revision, "the note was committed")
	require.Len(t, run.Records, 2)

	// An event the machine does not have from its state is refused
	// before the journal is asked.
	err = m.fire(context.Background(), store.EventAnswer, move{})
	require.ErrorContains(t, err, "state machine event answer from prepared")
	require.Equal(t, int64(1), run.Op.Revision)
}

// A reload sets the machine only to a state its edges reach from where it
// stood: a journal that went back is not followed.
func TestAReloadFollowsOnlyTheMachinesEdges(t *testing.T) {
	t.Parallel()
	run := preparedRun()
	run.Op.State = store.StateAnswered
	j := &dryJournal{run: &Run{Op: &store.Operation{ID: 1, MutationID: "m", State: store.StateResolving}}}
	m := newEngine(j, Plan{Family: scriptFamily{}}, nil).newMachine(run)
	require.NoError(t, m.reload(context.Background()))
	require.Equal(t, "resolving", m.fsm.Current())

	j.run.Op = &store.Operation{ID: 1, MutationID: "m", State: store.StatePrepared}
	require.ErrorContains(t, m.reload(context.Background()), "cannot reach from resolving")
	require.Equal(t, "resolving", m.fsm.Current())
}
