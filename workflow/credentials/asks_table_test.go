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
	call := store.Record{Kind: store.RecordAuthorityCall, Step: stepDeletePod, Target: store.Target{Kind: store.TargetPod, Namespace: nsShop, Name: podApp}, UID: string(pod.UID),
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
		{Name: "the same call, the server refusing now for a cause no run restarted it for: sent", Setup: respec(withServers, staleServer),
			Check: func(t *testing.T, e *env, r result) {
				healthy(t, e, r)
				// A new Secret version: a new cause (run 1 restarted for the
				// old one).
				e.k.editSecret(e.cmd.Spec.Servers[0].Secret, func(s *corev1.Secret) { s.Annotations["example.com/touched"] = "yes" })
				e.k.probes[podApp] = []ProbeResult{{Status: ProbeRefused, Reason: "wrongpass"}}
				e.forgeDeletePod()
				r = e.run()
				require.Equal(t, 2, e.k.count(opDeletePod, podApp), "asked now: sent")
				require.Equal(t, "completed", r.Ending())
			}},
		// The unfinished run's own call does not hide the restart run 1
		// made for the same cause: one restart per cause, whoever wrote
		// the unfinished run.
		{Name: "the same call, the server refusing now for the cause run 1 restarted it for: refused", Setup: respec(withServers, staleServer),
			Check: func(t *testing.T, e *env, r result) {
				healthy(t, e, r)
				e.k.probes[podApp] = []ProbeResult{{Status: ProbeRefused, Reason: "wrongpass"}}
				e.forgeDeletePod()
				r = e.run()
				require.Equal(t, 1, e.k.count(opDeletePod, podApp), "not restarted twice for one cause")
				require.Equal(t, "refused/"+workflow.ReasonCallNotAsked, r.Ending())
			}},
	})
}

// findsOne is a journal whose FindInRuns finds the newest of the runs
// holding a delete-pod record of the cause (runs, newest first) that is
// not the run the question excepts, or none, or fails.
type findsOne struct {
	workflow.JournalReader
	runs []string
	err  error
}

func (j findsOne) FindInRuns(_ context.Context, p store.RunRecordParams) (*store.RunRecord, error) {
	if j.err != nil {
		return nil, j.err
	}
	for _, run := range j.runs {
		if run != p.Except {
			return &store.RunRecord{Run: run}, nil
		}
	}
	return nil, nil
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
		found      []string // the runs holding a restart of this cause, newest first
		mine       string   // the run whose call is asked again ("" in a decision)
		want, by   string
	}{
		{name: "proven, no earlier restart", authorship: AuthorshipProven},
		{name: "adopted, no earlier restart", authorship: AuthorshipAdopted},
		{name: "unproven", authorship: AuthorshipUnproven, want: ReasonSecretUnproven},
		{name: "unproven, opted in", authorship: AuthorshipUnproven, optIn: true},
		{name: "unproven, opted in, restarted for the cause by run 1", authorship: AuthorshipUnproven, optIn: true, found: []string{"m-1:run-1"},
			want: ReasonServerStillRefuses, by: "m-1:run-1"},
		{name: "unproven wins over the restart memory", authorship: AuthorshipUnproven, found: []string{"m-1:run-1"}, want: ReasonSecretUnproven},
		{name: "proven, restarted for the cause by run 1", authorship: AuthorshipProven, found: []string{"m-1:run-1"},
			want: ReasonServerStillRefuses, by: "m-1:run-1"},
		{name: "asked again: the restart found is the call's own run", authorship: AuthorshipProven, found: []string{"m-1:run-2"}, mine: "m-1:run-2"},
		{name: "asked again: another run restarted for the cause", authorship: AuthorshipProven, found: []string{"m-1:run-1"}, mine: "m-1:run-2",
			want: ReasonServerStillRefuses, by: "m-1:run-1"},
		// The call's own run (a forged unfinished run, say) is newer than a
		// real restart for the cause: its own record does not hide it.
		{name: "asked again: the call's own run is newer than another run's restart", authorship: AuthorshipProven,
			found: []string{"m-1:run-7", "m-1:run-3"}, mine: "m-1:run-7", want: ReasonServerStillRefuses, by: "m-1:run-3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spec := withServers(basePlan())
			if c.optIn {
				spec.Repair = &Repair{RestartOnUnproven: true}
			}
			e := newEnv(t, spec)
			f := e.family()
			f.journal = findsOne{runs: c.found}
			why, by, err := f.restartDeclined(context.Background(), store.Target{Kind: store.TargetPod, Namespace: nsShop, Name: podApp}, c.authorship, cause{}, c.mine)
			require.NoError(t, err)
			require.Equal(t, c.want, why)
			require.Equal(t, c.by, by)
		})
	}
	t.Run("the journal cannot be read: unavailable", func(t *testing.T) {
		t.Parallel()
		f := newEnv(t, withServers(basePlan())).family()
		f.journal = findsOne{err: errors.New("connection refused")}
		_, _, err := f.restartDeclined(context.Background(), store.Target{Kind: store.TargetPod, Namespace: nsShop, Name: podApp}, AuthorshipProven, cause{}, "")
		var unavailable *workflow.Unavailable
		require.ErrorAs(t, err, &unavailable)
	})
}
