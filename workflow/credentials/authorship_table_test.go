package credentials

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/kubetest"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// planted is a complete Secret of the first planned name that someone
// with create on Secrets wrote before keyledger did, with a password they
// know (and, with mods, anything else).
func planted(mods ...func(*corev1.Secret)) func(e *env) {
	return func(e *env) {
		labelled := func(s *corev1.Secret) { s.Labels = map[string]string{"app.kubernetes.io/part-of": "shop"} }
		e.k.putSecret(theirSecret(secretApp, map[string]string{"password": "known-to-them"}, append([]func(*corev1.Secret){labelled}, mods...)...))
	}
}

// requireKept checks what r journaled of name, found in place (never
// POSTed): its entry in a read-secrets record (complete) or its read-secret
// observation (lacking something), with authorship want and lookAlike as
// given. It returns that entry's detail.
func requireKept(t *testing.T, r result, name string, want Authorship, lookAlike bool) map[string]any {
	t.Helper()
	require.Empty(t, callsOf(r, stepCreateSecret, "secret/"+name), "%s: found in place, never POSTed", name)
	var d map[string]any
	for _, rec := range r.records {
		switch {
		case rec.Kind == store.RecordObservation && rec.Step == stepReadSecrets:
			if e, ok := workflowtest.Fields(rec.Detail)["complete"].(map[string]any)[name].(map[string]any); ok {
				d = e
			}
		case rec.Kind == store.RecordObservation && rec.Step == stepReadSecret && rec.Target.String() == "secret/"+name:
			d = workflowtest.Fields(rec.Detail)
		}
	}
	require.NotNil(t, d, "%s: no read journaled", name)
	require.Equal(t, string(want), d["authorship"], name)
	require.Equal(t, lookAlike, d["lookAlike"] == true, name)
	return d
}

// TestAuthorshipTable: where each planned Secret came from, proven from
// every run of the plan, journaled and counted; a server's restart names
// the authorship of the Secret it follows.
func TestAuthorshipTable(t *testing.T) {
	t.Parallel()
	runTable(t, []row{
		{Name: "three runs: what run 1 created is proven on every later run, never a look-alike", Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, 0, r.unproven())
			require.Equal(t, map[string]any{secretApp: "proven", secretBus: "proven"}, r.authorship())
			for run := 2; run <= 3; run++ {
				r = e.run()
				require.Equal(t, "existing", r.Ending(), "run %d", run)
				require.Equal(t, 0, r.unproven(), "run %d", run)
				require.Equal(t, map[string]any{secretApp: "proven", secretBus: "proven"}, r.authorship(), "run %d", run)
				for _, n := range []string{secretApp, secretBus} {
					res := requireKept(t, r, n, AuthorshipProven, false)
					require.Equal(t, "m-1:run-1", res["by"], "the run whose create it carries")
				}
			}
		}},
		{Name: "planted before the first run, its server refusing: kept, unproven, not restarted, the refusal says so", Setup: respec(withServers, func(e *env) { planted()(e); staleServer(e) }),
			Check: func(t *testing.T, e *env, r result) {
				require.Equal(t, "refused/"+ReasonSecretUnproven, r.Ending())
				require.Zero(t, e.k.count(opDeletePod, podApp), "no restart onto an unproven Secret")
				require.Empty(t, r.trail(store.RecordAuthorityCall, stepDeletePod))
				require.Equal(t, podApp, r.summary()["pod"])
				require.Equal(t, secretApp, r.summary()["secret"])
				require.Equal(t, "unproven", r.summary()["authorship"], "the refusal names the Secret's authorship")
				require.Equal(t, "known-to-them", string(e.secret(secretApp).Data["password"]), "create-if-absent keeps it")
				r = e.run()
				require.Equal(t, "refused/"+ReasonSecretUnproven, r.Ending(), "and not on the next run either")
				require.Zero(t, e.k.count(opDeletePod, podApp))
			}},
		{Name: "planted, its server refusing, the plan opting in: kept, unproven, restarted once, the restart says so", Setup: respec(func(s Spec) Spec {
			s = withServers(s)
			s.Repair = &Repair{RestartOnUnproven: true}
			return s
		}, func(e *env) { planted()(e); staleServer(e) }),
			Check: func(t *testing.T, e *env, r result) {
				require.Equal(t, 1, e.k.count(opDeletePod, podApp), "restarted once")
				require.Equal(t, "completed", r.Ending())
				require.Equal(t, "known-to-them", string(e.secret(secretApp).Data["password"]), "create-if-absent keeps it")
				require.Equal(t, 1, r.unproven())
				require.Equal(t, map[string]any{secretApp: "unproven", secretBus: "proven"}, r.authorship())
				requireKept(t, r, secretApp, AuthorshipUnproven, false)
				call := callOf(r, stepDeletePod, "pod/"+podApp)
				require.Equal(t, secretApp, workflowtest.Fields(call.Detail)["secret"])
				require.Equal(t, "unproven", workflowtest.Fields(call.Detail)["authorship"], "the restart's record names what it followed")
				require.Equal(t, []any{map[string]any{"pod": podApp, "secret": secretApp, "authorship": "unproven"}}, r.summary()["restarts"])
				r = e.run()
				require.Equal(t, 1, r.unproven(), "still unproven on the next run")
				requireKept(t, r, secretApp, AuthorshipUnproven, false)
				require.Equal(t, []any{}, r.summary()["restarts"])
			}},
		{Name: "a look-alike carrying keyledger's annotations stays a look-alike on later runs", Setup: planted(func(s *corev1.Secret) {
			s.Annotations = map[string]string{AnnotationNonce: "0123456789abcdef0123456789abcdef", AnnotationCreatedBy: "m-1:run-1"}
		}), Check: func(t *testing.T, e *env, r result) {
			requireKept(t, r, secretApp, AuthorshipUnproven, true)
			r = e.run()
			requireKept(t, r, secretApp, AuthorshipUnproven, true)
			require.Equal(t, 1, r.unproven())
		}},
		{Name: "adopted, then proven adopted by its UID on the next run", Setup: respec(withAdoption, adoptable), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			requireKept(t, r, secretApp, AuthorshipAdopted, false)
			require.Equal(t, map[string]any{secretApp: "adopted", secretBus: "proven"}, r.authorship())
			require.Equal(t, 0, r.unproven())
			r = e.run()
			res := requireKept(t, r, secretApp, AuthorshipAdopted, false)
			require.Equal(t, "m-1:run-1", res["by"])
			require.Equal(t, 0, r.unproven())
		}},
		{Name: "another Secret planted under an adopted name after it was deleted is unproven", Setup: respec(withAdoption, adoptable), Check: func(t *testing.T, e *env, r result) {
			requireKept(t, r, secretApp, AuthorshipAdopted, false)
			e.k.Remove(kubetest.Secrets, secretApp)
			planted()(e) // a new UID
			r = e.run()
			requireKept(t, r, secretApp, AuthorshipUnproven, false)
			require.Equal(t, 1, r.unproven())
		}},
		{Name: "the outcome counts a kept Secret no run made as unproven even when it lacked something", Setup: partial, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, 1, r.unproven())
			require.Equal(t, counts(2, 1, 1, 1, 0), r.secretsCount())
		}},
	})
}

// TestKeptSecretChecksTable: a Secret found in place gets the same checks
// whether it is complete (settled by the resolution of the create's 409)
// or lacks something (read again and patched), and before a patch is sent
// again.
func TestKeptSecretChecksTable(t *testing.T) {
	t.Parallel()
	runTable(t, []row{
		{Name: "complete but terminating: refused, not kept", Setup: planted(kubetest.BeingDeleted), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonSecretTerminating, r.Ending())
			require.Zero(t, e.k.count(opPatchSecret, secretApp))
		}},
		{Name: "complete but of another type: refused, not kept", Setup: planted(func(s *corev1.Secret) { s.Type = corev1.SecretTypeBasicAuth }),
			Check: func(t *testing.T, e *env, r result) {
				require.Equal(t, "refused/"+ReasonSecretWrongType, r.Ending())
			}},
		{Name: "complete and immutable: nothing to write, kept", Setup: planted(func(s *corev1.Secret) {
			yes := true
			s.Immutable = &yes
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Zero(t, e.k.written("secret/"+secretApp))
		}},
		{Name: "adopted basic-auth keeps the type External Secrets gave it", Setup: respec(withAdoption, func(e *env) {
			adoptable(e)
			e.k.editSecret(secretApp, func(s *corev1.Secret) { s.Type = corev1.SecretTypeBasicAuth })
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, corev1.SecretTypeBasicAuth, e.secret(secretApp).Type)
			requireAdopted(t, e)
		}},
		{Name: "adopted TLS Secret: refused", Setup: respec(withAdoption, func(e *env) {
			adoptable(e)
			e.k.editSecret(secretApp, func(s *corev1.Secret) { s.Type = corev1.SecretTypeTLS })
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonSecretWrongType, r.Ending())
		}},
		{Name: "made terminating before a lost patch: refused, never sent again", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.LostBefore().First(e.k.their(func(k *credentialsAPI) {
				k.editSecret(secretApp, kubetest.BeingDeleted)
			}))))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonSecretTerminating, r.Ending())
			require.Equal(t, 1, e.k.count(opPatchSecret, secretApp), "not sent again")
			require.NotContains(t, e.secret(secretApp).Data, "password")
		}},
	})
}

// TestRefusedBatchListsOnlyWrites: a batch whose one create is rejected
// names as applied only the creates keyledger made; a Secret its 409 found
// in place is kept, not applied.
func TestRefusedBatchListsOnlyWrites(t *testing.T) {
	t.Parallel()
	runTable(t, []row{
		{Name: "a kept look-alike is not applied", Setup: func(e *env) {
			planted()(e)
			e.k.script(on(opCreateSecret, secretBus, kubetest.Status(kubetest.Invalid("Secret", secretBus))))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/invalid", r.Ending())
			require.Nil(t, r.summary()["applied"], "keyledger wrote nothing")
			require.Nil(t, r.summary()["kept"], "the Secret found in place was never in the batch")
			require.Zero(t, e.k.count(opCreateSecret, secretApp))
		}},
	})
}

// failingRuns is a journal whose reads of the plan's other runs fail.
type failingRuns struct{ workflow.JournalReader }

func (failingRuns) FindInRuns(context.Context, store.RunRecordParams) (*store.RunRecord, error) {
	return nil, errors.New("connection refused")
}

// unreadableRuns is the family with a journal whose reads of other runs
// fail, whatever Operate binds.
type unreadableRuns struct{ *family }

func (u unreadableRuns) BindJournal(j workflow.JournalReader) { u.family.BindJournal(failingRuns{j}) }

// A Secret found in place whose authorship cannot be read from the journal
// is neither kept nor refused: nothing was sent, so the run ends with the
// journal unavailable and a rerun decides.
func TestAuthorshipJournalUnreadable(t *testing.T) {
	t.Parallel()
	e := rowEnv(t, nil, planted())
	plan := e.plan()
	plan.Family = unreadableRuns{e.family()}
	_, err := workflow.Operate(context.Background(), e.j, plan, nil)
	var unavailable *workflow.Unavailable
	require.ErrorAs(t, err, &unavailable)
	require.Equal(t, "postgresql", unavailable.Dependency)
	require.Zero(t, e.k.count(opPatchSecret, secretApp))
	require.Zero(t, e.k.count(opCreateSecret, secretApp))
}
