package versioned

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// forgeInterrupted journals, as whoever holds the namespace's journal role
// could with plain SQL, an unfinished run of cmd that read the live Secret
// and then called a delete of snapshot: a prune-snapshot whose answer was
// never recorded.
func (e *env) forgeInterrupted(cmd *Command, step string, snapshot string) {
	e.t.Helper()
	ctx := context.Background()
	op, created, err := e.j.Prepare(ctx, plan(cmd, e.api, e.limit).Prepare)
	require.NoError(e.t, err)
	require.True(e.t, created)
	live, snap := e.live(), e.api.Secret(snapshot)
	require.NotNil(e.t, snap, snapshot)
	_, err = e.j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling, Revision: op.Revision,
		Records: []store.Record{
			{Kind: store.RecordObservation, Step: StepReadLive, Target: store.SecretTarget(testNamespace, testName), UID: string(live.UID), ResourceVersion: live.ResourceVersion},
			{Kind: store.RecordAuthorityCall, Step: step, Target: store.SecretTarget(testNamespace, snapshot), Attempt: 1, Batch: 1,
				UID: string(snap.UID), ResourceVersion: snap.ResourceVersion},
		}})
	require.NoError(e.t, err)
}

// A record is evidence, never an instruction: a prune-snapshot the journal
// holds for a snapshot retention keeps (version 1 of three, the limit
// ten) is not sent again when the run resumes; the run refuses
// call-not-asked and version 1 stays. One retention does delete is sent.
func TestJournaledPruneSentOnlyWhenRetentionAsks(t *testing.T) {
	t.Parallel()
	t.Run("a snapshot within the limit: refused, kept", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		live := e.history(2)
		cmd := e.update(e.rv(), "password", "v4")
		e.forgeInterrupted(cmd, StepPruneSnapshot, SnapshotName(live.UID, 1))
		o := e.run(cmd)
		var refused *workflow.Refused
		require.ErrorAs(t, o.err, &refused)
		require.Equal(t, workflow.ReasonCallNotAsked, refused.Reason)
		require.NotNil(t, e.snap(live.UID, 1), "version 1 kept")
		require.Equal(t, live.ResourceVersion, e.rv(), "nothing written live")
	})
	t.Run("a snapshot beyond the limit: sent, then the update completes", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		live := e.history(4) // v1..v4 within the default limit
		e.limit = 3          // then the limit is lowered: v1 is beyond it
		cmd := e.update(e.rv(), "password", "v6")
		e.forgeInterrupted(cmd, StepPruneSnapshot, SnapshotName(live.UID, 1))
		o := e.run(cmd)
		require.NoError(t, o.err)
		require.Nil(t, e.snap(live.UID, 1), "retention deletes version 1")
		for n := int64(3); n <= 5; n++ {
			require.NotNil(t, e.snap(live.UID, n), "version %d kept: the limit is three", n)
		}
	})
}
