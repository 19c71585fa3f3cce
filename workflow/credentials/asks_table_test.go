package credentials

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// forgeDeletePod journals, through the journal's own interface as its role
// could with plain SQL, the plan's next run left in calling with one
// delete-pod call of the server pod as it is now (its UID, and the cause a
// refusal would have now, so only what the cluster says can stop it).
func (e *env) forgeDeletePod() {
	e.t.Helper()
	ctx := context.Background()
	plan := e.plan()
	op, created, err := e.j.PrepareRun(ctx, plan.Prepare)
	require.NoError(e.t, err)
	require.True(e.t, created, "a new run of the plan")
	pod := e.k.pod(podApp)
	srv := e.cmd.Spec.Servers[0]
	c := restartCause(srv, pod, e.secret(srv.Secret).ResourceVersion)
	call := store.Record{Kind: store.RecordAuthorityCall, Step: stepDeletePod, Target: "pod/" + podApp, UID: string(pod.UID),
		Digest: c.digest(), Attempt: 1, Batch: 1,
		Detail: store.DetailOf(deletePodDetail{Why: "refused-credentials", Secret: srv.Secret, Authorship: AuthorshipProven,
			Cause: causeDetail{SecretResourceVersion: c.SecretResourceVersion, Controller: c.Controller, Revision: c.Revision, Spec: c.Spec}})}
	_, err = e.j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling,
		Revision: op.Revision, Records: []store.Record{call}})
	require.NoError(e.t, err)
}

// TestJournaledCallAskedTable: a delete-pod call the journal holds, found
// not applied, is sent again only when the decision made now would make
// it (workflow.Asker): a forged unfinished run whose pending call deletes a
// healthy server restarts nothing and refuses call-not-asked; the same
// call of a server that refuses now, for the cause the call names, is sent.
func TestJournaledCallAskedTable(t *testing.T) {
	t.Parallel()
	// healthy: run 1 repairs the stale server; its replacement accepts.
	healthy := func(t *testing.T, e *env, r result) {
		t.Helper()
		require.Equal(t, "completed", r.Ending())
		require.Equal(t, 1, e.k.count(opDeletePod, podApp))
	}
	runTable(t, []row{
		{Name: "a forged unfinished run deleting a healthy server: not sent, refused call-not-asked", Setup: respec(withServers, staleServer),
			Check: func(t *testing.T, e *env, r result) {
				healthy(t, e, r)
				uid := e.pod(podApp)
				e.forgeDeletePod()
				r = e.run()
				require.Equal(t, "refused/"+workflow.ReasonCallNotAsked, r.Ending())
				require.Equal(t, store.RunID("m-1", 2), r.op.MutationID, "the forged run, resumed")
				require.Equal(t, 1, e.k.count(opDeletePod, podApp), "the healthy server is not deleted")
				require.Equal(t, uid, e.pod(podApp))
				require.Equal(t, "pod/"+podApp, r.summary()["target"])
				require.Contains(t, r.summary()["why"], "does not refuse")
				require.Contains(t, r.trail(store.RecordProbe, ""), "probe-server pod/shop-app-0 accepted/ok", "the probe made now is journaled")
			}},
		{Name: "a forged unfinished run deleting a server not tied to its StatefulSet: nothing sent to it, refused", Setup: respec(withServers, staleServer),
			Check: func(t *testing.T, e *env, r result) {
				healthy(t, e, r)
				e.forgeDeletePod()
				e.k.editPod(podApp, func(p *corev1.Pod) { p.OwnerReferences[0].APIVersion = "example.com/v1" })
				probed := e.k.probed[podApp]
				r = e.run()
				require.Equal(t, "refused/"+workflow.ReasonCallNotAsked, r.Ending())
				require.Equal(t, probed, e.k.probed[podApp], "not probed")
				require.Equal(t, 1, e.k.count(opDeletePod, podApp))
			}},
		{Name: "the same call, the server refusing now for that cause: sent", Setup: respec(withServers, staleServer),
			Check: func(t *testing.T, e *env, r result) {
				healthy(t, e, r)
				e.k.probes[podApp] = []ProbeResult{{Status: ProbeRefused, Reason: "wrongpass"}}
				e.forgeDeletePod()
				r = e.run()
				require.Equal(t, 2, e.k.count(opDeletePod, podApp), "asked now: sent")
				require.Equal(t, "completed", r.Ending())
			}},
	})
}
