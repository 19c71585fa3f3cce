package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/keyledger/keyledger/store"
)

// adoptable creates what External Secrets Operator leaves behind for one
// generator-backed Secret: the Password generator (when generator is not
// empty), the ExternalSecret (with finalizers, if any) and the Secret it
// owns. Without a generator to create, the ExternalSecret names
// <name>-password. It returns the ExternalSecret.
func (e *env) adoptable(name, generator string, finalizers ...string) *unstructured.Unstructured {
	e.t.Helper()
	installExternalSecretsCRDs(e.t)
	ctx, dyn := e.t.Context(), e.dynamicClient()
	if generator != "" {
		e.passwordGenerator(generator)
	} else {
		generator = name + "-password"
	}
	obj := generatorBackedExternalSecret(name, generator)
	if len(finalizers) > 0 {
		obj.SetFinalizers(finalizers)
	}
	es, err := dyn.Resource(externalSecretsGVR).Namespace(e.ns).Create(ctx, obj, metav1.CreateOptions{})
	require.NoError(e.t, err)
	yes := true
	e.createSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "external-secrets.io/v1", Kind: "ExternalSecret", Name: name,
			UID: es.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}},
		Data: map[string][]byte{"password": []byte("CANARY-generated-by-eso-" + name)}})
	return es
}

func (e *env) passwordGenerator(name string) *unstructured.Unstructured {
	e.t.Helper()
	g, err := e.dynamicClient().Resource(passwordsGVR).Namespace(e.ns).Create(e.t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"length": int64(32), "allowRepeat": true, "noUpper": false},
	}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	return g
}

func (e *env) externalSecrets() dynamic.ResourceInterface {
	return e.dynamicClient().Resource(externalSecretsGVR).Namespace(e.ns)
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
	installExternalSecretsCRDs(t)
	ctx, ess := t.Context(), e.externalSecrets()
	const remote, other = "shop-vault-app", "shop-other-app"
	_, err := ess.Create(ctx, remoteExternalSecret(remote), metav1.CreateOptions{})
	require.NoError(t, err)
	plan := credentialPlan(e.ns, "mut-unlisted", []planSecret{standardSecret(other), standardSecret(remote)})
	r := e.keyledger([]string{"run", e.writeCommand("plan.json", plan)}, e.asCredentialRunner(plan))
	require.Equal(t, 2, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := outcome(t, r)
	require.Equal(t, "external-secret-not-generator-backed", out["reason"])
	require.Equal(t, remote, out["externalSecret"], "the reason names it")
	require.Equal(t, false, out["listedInAdopt"])
	for _, n := range []string{other, remote} {
		_, err = e.kube.Client().CoreV1().Secrets(e.ns).Get(ctx, n, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "nothing was written: %s", n)
	}
	_, err = ess.Get(ctx, remote, metav1.GetOptions{})
	require.NoError(t, err, "the remote-store ExternalSecret is left alone")
	_, records := e.journalOf("mut-unlisted:run-1")
	require.Zero(t, count(records, store.RecordAuthorityCall))

	// A generator-backed ExternalSecret the plan does not list is adopted.
	const adopted = "shop-generated-app"
	es := e.adoptable(adopted, "")
	plan = credentialPlan(e.ns, "mut-unlisted-generated", []planSecret{standardSecret(adopted)})
	r = e.keyledger([]string{"run", e.writeCommand("generated.json", plan)}, e.asCredentialRunner(plan))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.EqualValues(t, 1, outcome(t, r)["externalSecretsDeleted"])
	_, err = ess.Get(ctx, adopted, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))
	s := e.getSecret(adopted)
	require.Equal(t, []byte("CANARY-generated-by-eso-"+adopted), s.Data["password"], "the value survives")
	require.Empty(t, s.OwnerReferences)
	_, records = e.journalOf("mut-unlisted-generated:run-1")
	calls := recordsOf(records, store.RecordAuthorityCall, "orphan-external-secret")
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
	ctx, ess := t.Context(), e.externalSecrets()
	const first, second = "switch-a", "switch-b"
	const hold = "keyledger.dev/test-hold"
	e.adoptable(first, "", hold)
	e.adoptable(second, "")
	plan := credentialPlan(e.ns, "mut-switch", []planSecret{standardSecret(first), standardSecret(second)}, func(spec map[string]any) {
		spec["adopt"] = []any{map[string]any{"externalSecret": first}, map[string]any{"externalSecret": second}}
	})
	done := make(chan result, 1)
	path, as := e.writeCommand("plan.json", plan), e.asCredentialRunner(plan)
	go func() { done <- e.keyledger([]string{"run", path}, as) }()

	// The run deleted the first one (held by a finalizer) and waits: switch
	// the second to a remote store, then let the first go.
	require.Eventually(t, func() bool {
		es, err := ess.Get(ctx, first, metav1.GetOptions{})
		return err == nil && es.GetDeletionTimestamp() != nil
	}, time.Minute, 50*time.Millisecond, "the first ExternalSecret was never deleted")
	es, err := ess.Get(ctx, second, metav1.GetOptions{})
	require.NoError(t, err)
	remote := remoteExternalSecret(second)
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

	var r result
	select {
	case r = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not end")
	}
	require.Equal(t, 2, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, "external-secret-not-generator-backed", outcome(t, r)["reason"])
	require.Equal(t, second, outcome(t, r)["externalSecret"])
	now, err := ess.Get(ctx, second, metav1.GetOptions{})
	require.NoError(t, err, "the switched ExternalSecret is not deleted")
	require.Nil(t, now.GetDeletionTimestamp())
	_, records := e.journalOf("mut-switch:run-1")
	calls := recordsOf(records, store.RecordAuthorityCall, "orphan-external-secret")
	require.Len(t, calls, 1, "only the first was deleted")
	require.Equal(t, "externalsecret/"+first, calls[0].Target.String())
	require.Zero(t, len(recordsOf(records, store.RecordAuthorityCall, "create-secret")), "no Secret written")
}

// An ExternalSecret re-created after a crash (its delete sent, or answered)
// is someone else's: the rerun refuses with external-secret-replaced, and
// never deletes it.
func TestIntegrationCredentialsExternalSecretRecreatedAfterCrash(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, ess := t.Context(), e.externalSecrets()
	for _, fp := range []string{"after-send", "after-answer"} {
		name := "recreated-" + fp
		e.adoptable(name, "")
		mutation := "mut-" + name
		plan := credentialPlan(e.ns, mutation, []planSecret{standardSecret(name)}, func(spec map[string]any) {
			spec["adopt"] = []any{map[string]any{"externalSecret": name}}
		})
		path, as := e.writeCommand(mutation+".json", plan), e.asCredentialRunner(plan)
		r := e.keyledger([]string{"run", path}, as, withFailpoint(fp))
		require.Equal(t, 137, r.Code, "%s: %s %s", fp, r.Stdout, r.Stderr)
		waitGone(t, ess, name)
		again, err := ess.Create(ctx, generatorBackedExternalSecret(name, name+"-password"), metav1.CreateOptions{})
		require.NoError(t, err)

		r = e.keyledger([]string{"run", path}, as)
		require.Equal(t, 2, r.Code, "%s: stdout %s stderr %s", fp, r.Stdout, r.Stderr)
		require.Equal(t, "external-secret-replaced", outcome(t, r)["reason"], fp)
		now, err := ess.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, fp)
		require.Equal(t, again.GetUID(), now.GetUID())
		require.Nil(t, now.GetDeletionTimestamp(), "%s: the re-created ExternalSecret is not deleted", fp)
		_, records := e.journalOf(mutation + ":run-1")
		require.Len(t, recordsOf(records, store.RecordAuthorityCall, "orphan-external-secret"), 1, fp)
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
	e.adoptable(name, generator)
	passwords := e.dynamicClient().Resource(passwordsGVR).Namespace(e.ns)
	plan := credentialPlan(e.ns, "mut-generator", []planSecret{standardSecret(name)}, func(spec map[string]any) {
		spec["adopt"] = []any{map[string]any{"externalSecret": name, "generators": []any{generator}}}
	})
	path, as := e.writeCommand("plan.json", plan), e.asCredentialRunner(plan)
	// The orphan delete is the first call, the generator delete the second.
	r := e.keyledger([]string{"run", path}, as, withFailpoint("after-send#2"))
	require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)
	waitGone(t, passwords, generator)
	again := e.passwordGenerator(generator)

	r = e.keyledger([]string{"run", path}, as)
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	now, err := passwords.Get(ctx, generator, metav1.GetOptions{})
	require.NoError(t, err, "the re-created generator is not deleted")
	require.Equal(t, again.GetUID(), now.GetUID())
	require.Nil(t, now.GetDeletionTimestamp())
	_, records := e.journalOf("mut-generator:run-1")
	calls := recordsOf(records, store.RecordAuthorityCall, "delete-generator")
	require.Len(t, calls, 1, "one delete for one step")
	require.NotEmpty(t, calls[0].UID)
	require.NotEmpty(t, calls[0].ResourceVersion, "the delete carries the preconditions of a journaled read")
	require.NotEqual(t, string(again.GetUID()), calls[0].UID)
	reads := recordsOf(records, store.RecordObservation, "read-generator")
	require.NotEmpty(t, reads)
	require.Equal(t, calls[0].UID, reads[0].UID, "the read is journaled")
	res := recordsOf(records, store.RecordResolution, "delete-generator")
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
	ess := e.externalSecrets()
	passwords := e.dynamicClient().Resource(passwordsGVR).Namespace(e.ns)
	// Calls: 1 orphan-external-secret, 2 delete-generator, 3 the patch of
	// the adopted Secret (found in place: never POSTed), 4 the create of the
	// absent one.
	crashes := []string{"after-prepare", "after-call", "after-send", "after-answer", "after-call#2", "after-send#2",
		"after-answer#2", "after-send#3", "after-answer#3", "after-send#4", "after-complete"}
	for i, fp := range crashes {
		t.Run(fp, func(t *testing.T) {
			adopted, fresh, generator := fmt.Sprintf("adopt-crash-%d", i), fmt.Sprintf("adopt-crash-%d-new", i), fmt.Sprintf("adopt-crash-%d-password", i)
			from := e.secretsRV()
			es := e.adoptable(adopted, generator)
			gen, err := passwords.Get(t.Context(), generator, metav1.GetOptions{})
			require.NoError(t, err)
			value := e.getSecret(adopted).Data["password"]
			mutation := fmt.Sprintf("mut-adopt-crash-%d", i)
			plan := credentialPlan(e.ns, mutation, []planSecret{standardSecret(adopted), standardSecret(fresh)}, func(spec map[string]any) {
				spec["adopt"] = []any{map[string]any{"externalSecret": adopted, "generators": []any{generator}}}
			})
			path, as := e.writeCommand(mutation+".json", plan), e.asCredentialRunner(plan)
			r := e.keyledger([]string{"run", path}, as, withFailpoint(fp))
			require.Equal(t, 137, r.Code, "must die at %s: %s %s", fp, r.Stdout, r.Stderr)
			r = e.keyledger([]string{"run", path}, as)
			require.Equal(t, 0, r.Code, "%s: %s %s", fp, r.Stdout, r.Stderr)

			_, err = ess.Get(t.Context(), adopted, metav1.GetOptions{})
			require.True(t, apierrors.IsNotFound(err), "the ExternalSecret is gone: %v", err)
			_, err = passwords.Get(t.Context(), generator, metav1.GetOptions{})
			require.True(t, apierrors.IsNotFound(err), "the generator is gone: %v", err)
			s := e.getSecret(adopted)
			require.Equal(t, value, s.Data["password"], "the adopted value survives")
			require.Equal(t, "app", string(s.Data["username"]))
			require.Empty(t, s.OwnerReferences)
			require.Len(t, e.getSecret(fresh).Data["password"], 32)
			creates := e.secretCreates(from)
			require.Equal(t, 1, creates[adopted], "created once (by the test)")
			require.Equal(t, 1, creates[fresh], "created once")

			op, records := e.journalOf(mutation + ":run-1")
			require.Equal(t, store.StateCompleted, op.State)
			// One delete each took effect; a call recorded again was sent
			// again only after a re-read showed the first had not (same UID
			// and resourceVersion), with the same preconditions.
			for step, uid := range map[string]string{"orphan-external-secret": string(es.GetUID()), "delete-generator": string(gen.GetUID())} {
				calls := recordsOf(records, store.RecordAuthorityCall, step)
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
				for _, r := range recordsOf(records, store.RecordResolution, step) {
					if r.Status == "not-applied" {
						require.Equal(t, store.Reason("resource-version-unchanged"), r.Reason, step)
						notApplied++
					}
				}
				require.Equal(t, len(calls)-1, notApplied, "%s: every call sent again follows a re-read that found it not applied", step)
			}
			requireNoValues(t, r.Stdout+r.Stderr+e.journalText(mutation+":run-1"), [][]byte{value})
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
	ctx, ess := t.Context(), e.externalSecrets()
	for _, tc := range []struct {
		name   string
		change func(es *unstructured.Unstructured) *unstructured.Unstructured
		code   int
	}{
		{"switched", func(es *unstructured.Unstructured) *unstructured.Unstructured {
			remote := remoteExternalSecret(es.GetName())
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
		es := e.adoptable(name, "")
		mutation := "mut-" + name
		plan := credentialPlan(e.ns, mutation, []planSecret{standardSecret(name)}, func(spec map[string]any) {
			spec["adopt"] = []any{map[string]any{"externalSecret": name}}
		})
		path, as := e.writeCommand(mutation+".json", plan), e.asCredentialRunner(plan)
		r := e.keyledger([]string{"run", path}, as, withFailpoint("after-call"))
		require.Equal(t, 137, r.Code, "%s: %s %s", tc.name, r.Stdout, r.Stderr)
		changed, err := ess.Update(ctx, tc.change(es), metav1.UpdateOptions{})
		require.NoError(t, err)

		r = e.keyledger([]string{"run", path}, as)
		require.Equal(t, tc.code, r.Code, "%s: stdout %s stderr %s", tc.name, r.Stdout, r.Stderr)
		_, records := e.journalOf(mutation + ":run-1")
		calls := recordsOf(records, store.RecordAuthorityCall, "orphan-external-secret")
		res := recordsOf(records, store.RecordResolution, "orphan-external-secret")
		require.NotEmpty(t, res, tc.name)
		if tc.code == 2 {
			require.Equal(t, "external-secret-not-generator-backed", outcome(t, r)["reason"])
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
