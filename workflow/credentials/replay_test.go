package credentials

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/kubetest"
)

// forge journals, as anyone who can write the journal could, a completed
// operation named mutationID for the plan's command (its kind and digest)
// that the API server never saw.
func (e *env) forge(mutationID string) {
	e.t.Helper()
	ctx := context.Background()
	p := e.plan().Prepare
	p.MutationID = mutationID
	op, created, err := e.j.Prepare(ctx, p)
	require.NoError(e.t, err)
	require.True(e.t, created)
	_, err = e.j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCompleted,
		Revision: op.Revision, Outcome: string(workflow.OutcomeCompleted),
		Records: []store.Record{{Kind: store.RecordCompletion, Step: "complete", Status: store.Status(workflow.OutcomeCompleted)}}})
	require.NoError(e.t, err)
}

// A plan is desired state: a terminal run is never replayed, the next run
// starts and reads the cluster afresh. A forged completed run (the newest
// run, as the journal orders them) does not stop it from converging.
func TestForgedCompletedRunDoesNotStopConvergence(t *testing.T) {
	t.Parallel()
	t.Run("forged as the first run", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, basePlan())
		e.forge(store.RunID("m-1", 1))
		r := e.run()
		require.Equal(t, "completed", r.Ending())
		require.Equal(t, store.RunID("m-1", 2), r.op.MutationID, "the next run, not a replay")
		require.Equal(t, counts(2, 2, 0, 0, 0), r.secretsCount())
		e.requirePlanned(secretApp, true)
		e.requirePlanned(secretBus, true)
	})
	t.Run("forged after a real run, a Secret deleted since", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, basePlan())
		require.Equal(t, "completed", e.run().Ending())
		e.k.Remove(kubetest.Secrets, secretBus) // someone else's delete
		e.forge(store.RunID("m-1", 2))
		r := e.run()
		require.Equal(t, "completed", r.Ending())
		require.Equal(t, store.RunID("m-1", 3), r.op.MutationID)
		require.Equal(t, counts(2, 1, 0, 1, 1), r.secretsCount(), "the deleted one created again, the other kept unchanged")
		e.requirePlanned(secretBus, true)
	})
}

// A completion forged under the command's own mutation ID after its runs
// (its row id is the highest) is not the plan's newest run: the newest is
// chosen by run number, and the bare ID counts only while no run exists.
// The next run is run 2, reads the cluster and finds everything in place.
func TestBareIDAfterRunsIsIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basePlan())
	require.Equal(t, "completed", e.run().Ending())
	e.forge("m-1")
	writes := e.k.written("secret/"+secretApp) + e.k.written("secret/"+secretBus)
	r := e.run()
	require.NoError(t, r.err)
	require.Equal(t, "existing", r.Ending())
	require.Equal(t, store.RunID("m-1", 2), r.op.MutationID)
	require.Equal(t, writes, e.k.written("secret/"+secretApp)+e.k.written("secret/"+secretBus))
}
