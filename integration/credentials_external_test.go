package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

func externalSecrets(e *env) dynamic.ResourceInterface {
	return e.DynamicClient().Resource(suite.ExternalSecretsGVR).Namespace(e.NS)
}

// waitGone waits until the named object of r is gone.
func waitGone(t *testing.T, r dynamic.ResourceInterface, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := r.Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 50*time.Millisecond, "%s never went", name)
}

// Every planned Secret's ExternalSecret is read, listed in adopt or not: a
// remote-store one stops the run before any write; a generator-backed one
// is adopted.
func TestIntegrationCredentialsUnlistedExternalSecret(t *testing.T) {
	t.Parallel()
	e := setup(t)
	suite.InstallExternalSecretsCRDs(t)
	ctx, ess := t.Context(), externalSecrets(e)
	const remote, other = "shop-vault-app", "shop-other-app"
	_, err := ess.Create(ctx, suite.RemoteExternalSecret(remote), metav1.CreateOptions{})
	require.NoError(t, err)
	plan := suite.CredentialPlan(e.NS, "mut-unlisted", []suite.PlanSecret{suite.StandardSecret(other), suite.StandardSecret(remote)})
	r := e.Keyledger([]string{"run", e.WriteCommand("plan.json", plan)}, e.AsCredentialRunner(plan))
	require.Equal(t, 2, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := suite.Outcome(t, r)
	require.Equal(t, "external-secret-not-generator-backed", out["reason"])
	require.Equal(t, remote, out["externalSecret"], "the reason names it")
	require.Equal(t, false, out["listedInAdopt"])
	for _, n := range []string{other, remote} {
		_, err = e.Kube.Client().CoreV1().Secrets(e.NS).Get(ctx, n, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "nothing was written: %s", n)
	}
	_, err = ess.Get(ctx, remote, metav1.GetOptions{})
	require.NoError(t, err, "the remote-store ExternalSecret is left alone")
	_, records := e.JournalOf("mut-unlisted:run-1")
	require.Zero(t, suite.Count(records, store.RecordAuthorityCall))

	// A generator-backed ExternalSecret the plan does not list is adopted.
	const adopted = "shop-generated-app"
	es := e.Adoptable(adopted, "")
	plan = suite.CredentialPlan(e.NS, "mut-unlisted-generated", []suite.PlanSecret{suite.StandardSecret(adopted)})
	r = e.Keyledger([]string{"run", e.WriteCommand("generated.json", plan)}, e.AsCredentialRunner(plan))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.EqualValues(t, 1, suite.Outcome(t, r)["externalSecretsDeleted"])
	_, err = ess.Get(ctx, adopted, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))
	s := e.GetSecret(adopted)
	require.Equal(t, []byte("CANARY-generated-by-eso-"+adopted), s.Data["password"], "the value survives")
	require.Empty(t, s.OwnerReferences)
	_, records = e.JournalOf("mut-unlisted-generated:run-1")
	calls := suite.RecordsOf(records, store.RecordAuthorityCall, "orphan-external-secret")
	require.Len(t, calls, 1)
	require.Equal(t, string(es.GetUID()), calls[0].UID)
	require.NotEmpty(t, calls[0].ResourceVersion, "the delete carries the resourceVersion of the read right before it")
}

// An ExternalSecret switched to a remote store while the run waits for
// another one to go is read again right before its delete, and stops the
// run: it is never deleted.
func TestIntegrationCredentialsExternalSecretSwitchedWhileWaiting(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, ess := t.Context(), externalSecrets(e)
	const first, second = "switch-a", "switch-b"
	const hold = "keyledger.dev/test-hold"
	e.Adoptable(first, "", hold)
	e.Adoptable(second, "")
	plan := suite.CredentialPlan(e.NS, "mut-switch", []suite.PlanSecret{suite.StandardSecret(first), suite.StandardSecret(second)}, func(spec map[string]any) {
		spec["adopt"] = []any{map[string]any{"externalSecret": first}, map[string]any{"externalSecret": second}}
	})
	done := make(chan suite.Result, 1)
	path, as := e.WriteCommand("plan.json", plan), e.AsCredentialRunner(plan)
	go func() { done <- e.Keyledger([]string{"run", path}, as) }()

	// The run deleted the first one (held by a finalizer) and waits: switch
	// the second to a remote store, then let the first go.
	require.Eventually(t, func() bool {
		es, err := ess.Get(ctx, first, metav1.GetOptions{})
		return err == nil && es.GetDeletionTimestamp() != nil
	}, time.Minute, 50*time.Millisecond, "the first ExternalSecret was never deleted")
	es, err := ess.Get(ctx, second, metav1.GetOptions{})
	require.NoError(t, err)
	remote := suite.RemoteExternalSecret(second)
	remote.SetResourceVersion(es.GetResourceVersion())
	remote.SetUID(es.GetUID())
	_, err = ess.Update(ctx, remote, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the garbage collector may update it too: retry on conflict
		held, err := ess.Get(ctx, first, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true
		}
		if err != nil {
			return false
		}
		held.SetFinalizers(nil)
		_, err = ess.Update(ctx, held, metav1.UpdateOptions{})
		return err == nil
	}, time.Minute, 50*time.Millisecond, "releasing the first ExternalSecret")

	var r suite.Result
	select {
	case r = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not end")
	}
	require.Equal(t, 2, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "external-secret-not-generator-backed", suite.Outcome(t, r)["reason"])
	require.Equal(t, second, suite.Outcome(t, r)["externalSecret"])
	now, err := ess.Get(ctx, second, metav1.GetOptions{})
	require.NoError(t, err, "the switched ExternalSecret is not deleted")
	require.Nil(t, now.GetDeletionTimestamp())
	_, records := e.JournalOf("mut-switch:run-1")
	calls := suite.RecordsOf(records, store.RecordAuthorityCall, "orphan-external-secret")
	require.Len(t, calls, 1, "only the first was deleted")
	require.Equal(t, "externalsecret/"+first, calls[0].Target.String())
	require.Zero(t, len(suite.RecordsOf(records, store.RecordAuthorityCall, "create-secret")), "no Secret written")
}

// An ExternalSecret re-created after a crash (its delete sent, or answered)
// is someone else's: the rerun refuses with external-secret-replaced, and
// never deletes it.
func TestIntegrationCredentialsExternalSecretRecreatedAfterCrash(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, ess := t.Context(), externalSecrets(e)
	for _, fp := range []string{"after-send", "after-answer"} {
		name := "recreated-" + fp
		e.Adoptable(name, "")
		mutation := "mut-" + name
		plan := suite.CredentialPlan(e.NS, mutation, []suite.PlanSecret{suite.StandardSecret(name)}, func(spec map[string]any) {
			spec["adopt"] = []any{map[string]any{"externalSecret": name}}
		})
		path, as := e.WriteCommand(mutation+".json", plan), e.AsCredentialRunner(plan)
		r := e.Keyledger([]string{"run", path}, as, suite.WithFailpoint(fp))
		require.Equal(t, 137, r.Code, "%s: %s %s", fp, r.Stdout, r.Stderr)
		waitGone(t, ess, name)
		again, err := ess.Create(ctx, suite.GeneratorBackedExternalSecret(name, name+"-password"), metav1.CreateOptions{})
		require.NoError(t, err)

		r = e.Keyledger([]string{"run", path}, as)
		require.Equal(t, 2, r.Code, "%s: stdout %s stderr %s", fp, r.Stdout, r.Stderr)
		require.Equal(t, "external-secret-replaced", suite.Outcome(t, r)["reason"], fp)
		now, err := ess.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, fp)
		require.Equal(t, again.GetUID(), now.GetUID())
		require.Nil(t, now.GetDeletionTimestamp(), "%s: the re-created ExternalSecret is not deleted", fp)
		_, records := e.JournalOf(mutation + ":run-1")
		require.Len(t, suite.RecordsOf(records, store.RecordAuthorityCall, "orphan-external-secret"), 1, fp)
	}
}

// A generator re-created after a crash between sending its delete and
// recording the answer is not deleted a second time: the resolution reads
// it, finds another UID than the journaled call's, and leaves it.
func TestIntegrationCredentialsGeneratorRecreatedAfterCrash(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const name, generator = "shop-gen-app", "shop-gen-password"
	e.Adoptable(name, generator)
	passwords := e.DynamicClient().Resource(suite.PasswordsGVR).Namespace(e.NS)
	plan := suite.CredentialPlan(e.NS, "mut-generator", []suite.PlanSecret{suite.StandardSecret(name)}, func(spec map[string]any) {
		spec["adopt"] = []any{map[string]any{"externalSecret": name, "generators": []any{generator}}}
	})
	path, as := e.WriteCommand("plan.json", plan), e.AsCredentialRunner(plan)
	// The orphan delete is the first call, the generator delete the second.
	r := e.Keyledger([]string{"run", path}, as, suite.WithFailpoint("after-send#2"))
	require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)
	waitGone(t, passwords, generator)
	again := e.PasswordGenerator(generator)

	r = e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	now, err := passwords.Get(ctx, generator, metav1.GetOptions{})
	require.NoError(t, err, "the re-created generator is not deleted")
	require.Equal(t, again.GetUID(), now.GetUID())
	require.Nil(t, now.GetDeletionTimestamp())
	_, records := e.JournalOf("mut-generator:run-1")
	calls := suite.RecordsOf(records, store.RecordAuthorityCall, "delete-generator")
	require.Len(t, calls, 1, "one delete for one step")
	require.NotEmpty(t, calls[0].UID)
	require.NotEmpty(t, calls[0].ResourceVersion, "the delete carries the preconditions of a journaled read")
	require.NotEqual(t, string(again.GetUID()), calls[0].UID)
	reads := suite.RecordsOf(records, store.RecordObservation, "read-generator")
	require.NotEmpty(t, reads)
	require.Equal(t, calls[0].UID, reads[0].UID, "the read is journaled")
	res := suite.RecordsOf(records, store.RecordResolution, "delete-generator")
	require.Len(t, res, 1)
	require.Equal(t, store.Reason("replaced-not-deleted"), res[0].Reason)
	require.Equal(t, string(again.GetUID()), res[0].UID)
}

// An adoption plan crashed after every transition (orphan delete, generator
// delete, the create batch, the patch of the adopted Secret), then run
// again: the ExternalSecret and the generator are deleted once each, every
// Secret is created once (the API server's watch history), and the adopted
// value survives byte-identical.
func TestIntegrationCredentialsAdoptionCrashAtEveryTransition(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ess := externalSecrets(e)
	passwords := e.DynamicClient().Resource(suite.PasswordsGVR).Namespace(e.NS)
	// Calls: 1 orphan-external-secret, 2 delete-generator, 3 the patch of
	// the adopted Secret (found in place: never POSTed), 4 the create of the
	// absent one.
	crashes := []string{"after-prepare", "after-call", "after-send", "after-answer", "after-call#2", "after-send#2",
		"after-answer#2", "after-send#3", "after-answer#3", "after-send#4", "after-complete"}
	for i, fp := range crashes {
		t.Run(fp, func(t *testing.T) {
			adopted, fresh, generator := fmt.Sprintf("adopt-crash-%d", i), fmt.Sprintf("adopt-crash-%d-new", i), fmt.Sprintf("adopt-crash-%d-password", i)
			from := e.SecretsRV()
			es := e.Adoptable(adopted, generator)
			gen, err := passwords.Get(t.Context(), generator, metav1.GetOptions{})
			require.NoError(t, err)
			value := e.GetSecret(adopted).Data["password"]
			mutation := fmt.Sprintf("mut-adopt-crash-%d", i)
			plan := suite.CredentialPlan(e.NS, mutation, []suite.PlanSecret{suite.StandardSecret(adopted), suite.StandardSecret(fresh)}, func(spec map[string]any) {
				spec["adopt"] = []any{map[string]any{"externalSecret": adopted, "generators": []any{generator}}}
			})
			path, as := e.WriteCommand(mutation+".json", plan), e.AsCredentialRunner(plan)
			r := e.Keyledger([]string{"run", path}, as, suite.WithFailpoint(fp))
			require.Equal(t, 137, r.Code, "must die at %s: %s %s", fp, r.Stdout, r.Stderr)
			r = e.Keyledger([]string{"run", path}, as)
			require.Equal(t, 0, r.Code, "%s: %s %s", fp, r.Stdout, r.Stderr)

			_, err = ess.Get(t.Context(), adopted, metav1.GetOptions{})
			require.True(t, apierrors.IsNotFound(err), "the ExternalSecret is gone: %v", err)
			_, err = passwords.Get(t.Context(), generator, metav1.GetOptions{})
			require.True(t, apierrors.IsNotFound(err), "the generator is gone: %v", err)
			s := e.GetSecret(adopted)
			require.Equal(t, value, s.Data["password"], "the adopted value survives")
			require.Equal(t, "app", string(s.Data["username"]))
			require.Empty(t, s.OwnerReferences)
			require.Len(t, e.GetSecret(fresh).Data["password"], 32)
			creates := e.SecretCreates(from)
			require.Equal(t, 1, creates[adopted], "created once (by the test)")
			require.Equal(t, 1, creates[fresh], "created once")

			op, records := e.JournalOf(mutation + ":run-1")
			require.Equal(t, store.StateCompleted, op.State)
			// One delete each took effect; a call recorded again was sent
			// again only after a re-read showed the first had not (same UID
			// and resourceVersion), with the same preconditions.
			for step, uid := range map[string]string{"orphan-external-secret": string(es.GetUID()), "delete-generator": string(gen.GetUID())} {
				calls := suite.RecordsOf(records, store.RecordAuthorityCall, step)
				require.NotEmpty(t, calls, step)
				for _, c := range calls {
					require.Equal(t, uid, c.UID, step)
					require.Equal(t, calls[0].ResourceVersion, c.ResourceVersion, step)
				}
				took := 0
				for _, r := range records {
					if r.Step == step && (r.Kind == store.RecordAuthorityResult && r.Status == "applied" ||
						r.Kind == store.RecordResolution && r.Status == "ours") {
						took++
					}
				}
				require.Equal(t, 1, took, "%s took effect once", step)
				notApplied := 0
				for _, r := range suite.RecordsOf(records, store.RecordResolution, step) {
					if r.Status == "not-applied" {
						require.Equal(t, store.Reason("resource-version-unchanged"), r.Reason, step)
						notApplied++
					}
				}
				require.Equal(t, len(calls)-1, notApplied, "%s: every call sent again follows a re-read that found it not applied", step)
			}
			suite.RequireNoValues(t, r.Stdout+r.Stderr+e.JournalText(mutation+":run-1"), [][]byte{value})
		})
	}
}

// A delete recorded but not applied (crash after the call record) is
// resolved by reading the ExternalSecret again and checking it again: one
// switched to a remote store meanwhile is refused and never deleted; one
// only relabelled is deleted with the new read's resourceVersion.
func TestIntegrationCredentialsOrphanResolutionRevalidates(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, ess := t.Context(), externalSecrets(e)
	for _, tc := range []struct {
		name   string
		change func(es *unstructured.Unstructured) *unstructured.Unstructured
		code   int
	}{
		{"switched", func(es *unstructured.Unstructured) *unstructured.Unstructured {
			remote := suite.RemoteExternalSecret(es.GetName())
			remote.SetUID(es.GetUID())
			remote.SetResourceVersion(es.GetResourceVersion())
			return remote
		}, 2},
		{"relabelled", func(es *unstructured.Unstructured) *unstructured.Unstructured {
			es.SetLabels(map[string]string{"team": "orders"})
			return es
		}, 0},
	} {
		name := "revalidate-" + tc.name
		es := e.Adoptable(name, "")
		mutation := "mut-" + name
		plan := suite.CredentialPlan(e.NS, mutation, []suite.PlanSecret{suite.StandardSecret(name)}, func(spec map[string]any) {
			spec["adopt"] = []any{map[string]any{"externalSecret": name}}
		})
		path, as := e.WriteCommand(mutation+".json", plan), e.AsCredentialRunner(plan)
		r := e.Keyledger([]string{"run", path}, as, suite.WithFailpoint("after-call"))
		require.Equal(t, 137, r.Code, "%s: %s %s", tc.name, r.Stdout, r.Stderr)
		changed, err := ess.Update(ctx, tc.change(es), metav1.UpdateOptions{})
		require.NoError(t, err)

		r = e.Keyledger([]string{"run", path}, as)
		require.Equal(t, tc.code, r.Code, "%s: stdout %s stderr %s", tc.name, r.Stdout, r.Stderr)
		_, records := e.JournalOf(mutation + ":run-1")
		calls := suite.RecordsOf(records, store.RecordAuthorityCall, "orphan-external-secret")
		res := suite.RecordsOf(records, store.RecordResolution, "orphan-external-secret")
		require.NotEmpty(t, res, tc.name)
		if tc.code == 2 {
			require.Equal(t, "external-secret-not-generator-backed", suite.Outcome(t, r)["reason"])
			now, err := ess.Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err, "never deleted")
			require.Nil(t, now.GetDeletionTimestamp())
			require.Len(t, calls, 1, "not sent again")
			require.Equal(t, store.Status("theirs"), res[0].Status)
			continue
		}
		_, err = ess.Get(ctx, name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "deleted: %v", err)
		require.Len(t, calls, 2)
		require.Equal(t, store.Status("not-applied"), res[0].Status)
		require.Equal(t, store.Reason("resource-version-changed"), res[0].Reason)
		require.Equal(t, changed.GetResourceVersion(), calls[1].ResourceVersion, "sent again with the new read's preconditions")
	}
}
