package integration

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// TestIntegrationVersionedForgedPruneNotSent: a record is evidence, never
// an instruction. A Secret with three snapshots, well within the history
// limit; then, with the namespace's journal role and plain SQL, an
// interrupted SecretUpdate whose pending call is a prune-snapshot of
// version 1 (naming its live UID and resourceVersion, which anyone who may
// read the namespace's Secrets knows). The real update resumes it, finds
// the delete not applied, asks retention now (version 1 is kept), sends
// nothing and refuses call-not-asked, exit 2: version 1 is still there and
// the live Secret is untouched.
func TestIntegrationVersionedForgedPruneNotSent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	live := e.createSecret(plainSecret("db", map[string][]byte{"k": vCanary("v1")}))
	for i, m := range []string{"mut-fp-1", "mut-fp-2", "mut-fp-3"} {
		requireOK(t, e.update("db", m, vCanary(m), e.asWriter("db")), "completed")
		require.Len(t, e.snapshotsOf(live.UID), i+1)
	}
	cur := e.getSecret("db")
	v1 := e.requireSnapshot(live, 1, "mut-fp-1")

	path := e.writeCommand("mut-fp-forged.json", updateCommand(e.ns, "db", cur.ResourceVersion, "mut-fp-forged", map[string][]byte{"k": vCanary("new")}))
	cmd, err := versioned.Decode(readCommand(t, path))
	require.NoError(t, err)
	forgeOperation(t, e.runJournalURL(), store.PrepareParams{
		Kind: command.KindSecretUpdate, MutationID: "mut-fp-forged", RequestID: "req-mut-fp-forged", CommandDigest: cmd.Digest,
		Namespace: e.ns, Name: "db", Detail: store.DetailOf(map[string]any{"expectedResourceVersion": cur.ResourceVersion, "keys": []string{"k"}}),
	}, store.StateCalling,
		store.Record{Kind: store.RecordObservation, Step: versioned.StepReadLive, Target: store.SecretTarget(toyNamespace, "db"), UID: string(cur.UID), ResourceVersion: cur.ResourceVersion},
		store.Record{Kind: store.RecordAuthorityCall, Step: versioned.StepPruneSnapshot, Target: store.SecretTarget(toyNamespace, v1.Name), Attempt: 1, Batch: 1,
			UID: string(v1.UID), ResourceVersion: v1.ResourceVersion},
	)

	r := e.keyledger([]string{"run", path}, e.asWriter("db"))
	out := requireRefused(t, r, workflow.ReasonCallNotAsked)
	require.Equal(t, "secret/"+v1.Name, out["target"], "the outcome names the call it did not send")
	require.Equal(t, map[string]string{v1.Name: string(v1.UID) + "@" + v1.ResourceVersion}, pick(e.objectsOf(live.UID), v1.Name), "version 1 is kept")
	require.Len(t, e.snapshotsOf(live.UID), 3)
	require.Equal(t, cur.ResourceVersion, e.getSecret("db").ResourceVersion, "the live Secret is untouched")
	assertNoCanary(t, r.Stdout+r.Stderr, vCanary("new"), vCanary("v1"))
}

// pick keeps only the named entries of m.
func pick(m map[string]string, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if v, ok := m[n]; ok {
			out[n] = v
		}
	}
	return out
}
