package integration

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
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
	live := e.CreateSecret(suite.PlainSecret("db", map[string][]byte{"k": suite.VCanary("v1")}))
	for i, m := range []string{"mut-fp-1", "mut-fp-2", "mut-fp-3"} {
		suite.RequireOK(t, e.Update("db", m, suite.VCanary(m), e.AsWriter("db")), "completed")
		require.Len(t, e.SnapshotsOf(live.UID), i+1)
	}
	cur := e.GetSecret("db")
	v1 := e.RequireSnapshot(live, 1, "mut-fp-1")

	path := e.WriteCommand("mut-fp-forged.json", suite.UpdateCommand(e.NS, "db", cur.ResourceVersion, "mut-fp-forged", map[string][]byte{"k": suite.VCanary("new")}))
	cmd, err := versioned.Decode(suite.ReadCommand(t, path))
	require.NoError(t, err)
	suite.ForgeOperation(t, e.RunJournalURL(), store.PrepareParams{
		Kind: command.KindSecretUpdate, MutationID: "mut-fp-forged", RequestID: "req-mut-fp-forged", CommandDigest: cmd.Digest,
		Namespace: e.NS, Name: "db", Detail: store.DetailOf(map[string]any{"expectedResourceVersion": cur.ResourceVersion, "keys": []string{"k"}}),
	}, store.StateCalling,
		store.Record{Kind: store.RecordObservation, Step: versioned.StepReadLive, Target: store.SecretTarget(suite.ToyNamespace, "db"), UID: string(cur.UID), ResourceVersion: cur.ResourceVersion},
		store.Record{Kind: store.RecordAuthorityCall, Step: versioned.StepPruneSnapshot, Target: store.SecretTarget(suite.ToyNamespace, v1.Name), Attempt: 1, Batch: 1,
			UID: string(v1.UID), ResourceVersion: v1.ResourceVersion},
	)

	r := e.Keyledger([]string{"run", path}, e.AsWriter("db"))
	out := suite.RequireRefused(t, r, workflow.ReasonCallNotAsked)
	require.Equal(t, "secret/"+v1.Name, out["target"], "the outcome names the call it did not send")
	require.Equal(t, map[string]string{v1.Name: string(v1.UID) + "@" + v1.ResourceVersion}, pick(e.ObjectsOf(live.UID), v1.Name), "version 1 is kept")
	require.Len(t, e.SnapshotsOf(live.UID), 3)
	require.Equal(t, cur.ResourceVersion, e.GetSecret("db").ResourceVersion, "the live Secret is untouched")
	suite.AssertNoCanary(t, r.Stdout+r.Stderr, suite.VCanary("new"), suite.VCanary("v1"))
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
