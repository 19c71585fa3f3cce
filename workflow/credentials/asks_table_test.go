package credentials

import (
	"context"
	"errors"
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

// findsOne is a journal whose FindInRuns finds one delete-pod record of
// the cause (in run), or none (run empty), or fails.
type findsOne struct {
	workflow.JournalReader
	run string
	err error
}

func (j findsOne) FindInRuns(context.Context, store.RunRecordParams) (*store.RunRecord, error) {
	if j.err != nil || j.run == "" {
		return nil, j.err
	}
	return &store.RunRecord{Run: j.run}, nil
}

// TestRestartDeclinedTable: the decision whether a refusing server is
// restarted, from the Secret's authorship, the plan's opt-in and the
// restarts journaled for the same cause.
func TestRestartDeclinedTable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		authorship Authorship
		optIn      bool
		found      string // the run holding a restart of this cause
		mine       string // the run whose call is asked again ("" in a decision)
		want, by   string
	}{
		{name: "proven, no earlier restart", authorship: AuthorshipProven},
		{name: "adopted, no earlier restart", authorship: AuthorshipAdopted},
		{name: "unproven", authorship: AuthorshipUnproven, want: ReasonSecretUnproven},
		{name: "unproven, opted in", authorship: AuthorshipUnproven, optIn: true},
		{name: "unproven, opted in, restarted for the cause by run 1", authorship: AuthorshipUnproven, optIn: true, found: "m-1:run-1",
			want: ReasonServerStillRefuses, by: "m-1:run-1"},
		{name: "unproven wins over the restart memory", authorship: AuthorshipUnproven, found: "m-1:run-1", want: ReasonSecretUnproven},
		{name: "proven, restarted for the cause by run 1", authorship: AuthorshipProven, found: "m-1:run-1",
			want: ReasonServerStillRefuses, by: "m-1:run-1"},
		{name: "asked again: the restart found is the call's own run", authorship: AuthorshipProven, found: "m-1:run-2", mine: "m-1:run-2"},
		{name: "asked again: another run restarted for the cause", authorship: AuthorshipProven, found: "m-1:run-1", mine: "m-1:run-2",
			want: ReasonServerStillRefuses, by: "m-1:run-1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spec := withServers(basePlan())
			if c.optIn {
				spec.Repair = &Repair{RestartOnUnproven: true}
			}
			e := newEnv(t, spec)
			f := e.family()
			f.journal = findsOne{run: c.found}
			why, by, err := f.restartDeclined(context.Background(), "pod/"+podApp, c.authorship, cause{}, c.mine)
			require.NoError(t, err)
			require.Equal(t, c.want, why)
			require.Equal(t, c.by, by)
		})
	}
	t.Run("the journal cannot be read: unavailable", func(t *testing.T) {
		t.Parallel()
		f := newEnv(t, withServers(basePlan())).family()
		f.journal = findsOne{err: errors.New("connection refused")}
		_, _, err := f.restartDeclined(context.Background(), "pod/"+podApp, AuthorshipProven, cause{}, "")
		var unavailable *workflow.Unavailable
		require.ErrorAs(t, err, &unavailable)
	})
}
