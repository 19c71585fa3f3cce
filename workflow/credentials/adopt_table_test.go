package credentials

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/kubetest"
	"github.com/keyledger/keyledger/workflow/workflowtest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// adoptable puts in place what External Secrets left: a generator-backed
// ExternalSecret owning its Secret (with Argo CD's tracking), and the
// Password generator it used.
func adoptable(e *env) {
	es := e.k.putExternal(generatorBackedES(secretApp))
	e.k.putSecret(theirSecret(secretApp, map[string]string{"password": "from-generator"}, ownedBy(es)))
	e.k.putGenerator(generatorApp)
}

// requireAdopted: the Secret kept its value and lost every trace of its
// ExternalSecret and of Argo CD's tracking.
func requireAdopted(t *testing.T, e *env) {
	t.Helper()
	s := e.secret(secretApp)
	require.Equal(t, "from-generator", string(s.Data["password"]), "an adopted value is kept")
	require.Empty(t, s.OwnerReferences)
	require.NotContains(t, s.Annotations, AnnotationArgoTracking)
	require.NotContains(t, s.Labels, LabelArgoInstance)
	require.Equal(t, "shop", s.Labels["app.kubernetes.io/part-of"])
}

func (e *env) externalExists(name string) bool {
	return e.k.Object(grExternal, name) != nil
}

func (e *env) generatorExists(name string) bool {
	return e.k.Object(grGenerators, name) != nil
}

// TestOrphanExternalSecretTable: the orphan-external-secret call (DELETE
// with propagationPolicy Orphan and the UID and resourceVersion of the read
// right before it), then the bounded wait until it is gone.
func TestOrphanExternalSecretTable(t *testing.T) {
	t.Parallel()
	adopt := withAdoption
	es := "externalsecret/" + secretApp
	runTable(t, []row{
		{Name: "applied", Setup: respec(adopt, adoptable), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.False(t, e.externalExists(secretApp))
			requireAdopted(t, e)
			require.Equal(t, 1, e.k.written(es))
			require.Equal(t, float64(1), r.summary()["externalSecretsDeleted"])
			require.Equal(t, counts(2, 1, 1, 1, 0), r.secretsCount())
			call := callOf(r, stepOrphanExternalSecret, es)
			require.Equal(t, "Orphan", workflowtest.Fields(call.Detail)["propagationPolicy"])
			require.Equal(t, true, workflowtest.Fields(call.Detail)["listedInAdopt"])
			require.NotEmpty(t, call.UID)
			require.NotEmpty(t, call.ResourceVersion)
			require.Contains(t, r.trail(store.RecordObservation, "wait-external-secret-gone"), "wait-external-secret-gone externalsecret/shop-app gone/")
			require.Equal(t, []string{"orphan-external-secret externalsecret/shop-app applied/deleting", "delete-generator password/shop-app-password applied/deleted",
				"patch-secret secret/shop-app applied/patched", "create-secret secret/shop-bus applied/created"},
				r.trail(store.RecordAuthorityResult, ""), "orphan, retire, then patch the Secret found in place (never POSTed) and create the absent one")
		}},
		{Name: "lost-after-apply, collected before the read", Setup: respec(adopt, func(e *env) {
			adoptable(e)
			e.k.script(on(opOrphanExternal, secretApp, kubetest.AppliedLost()))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"orphan-external-secret externalsecret/shop-app ours/gone"}, r.trail(store.RecordResolution, stepOrphanExternalSecret))
			require.Equal(t, 1, e.k.count(opOrphanExternal, secretApp))
			requireAdopted(t, e)
		}},
		{Name: "lost-after-apply, still terminating at the read", Setup: respec(adopt, func(e *env) {
			adoptable(e)
			e.k.gcHold[secretApp] = 1
			e.k.script(on(opOrphanExternal, secretApp, kubetest.AppliedLost()))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"orphan-external-secret externalsecret/shop-app ours/deleting"}, r.trail(store.RecordResolution, stepOrphanExternalSecret))
			require.Equal(t, 1, e.k.count(opOrphanExternal, secretApp))
			requireAdopted(t, e)
		}},
		{Name: "lost-before-apply", Setup: respec(adopt, func(e *env) {
			adoptable(e)
			e.k.script(on(opOrphanExternal, secretApp, kubetest.LostBefore()))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"orphan-external-secret externalsecret/shop-app not-applied/resource-version-unchanged"},
				r.trail(store.RecordResolution, stepOrphanExternalSecret))
			require.Equal(t, 2, e.k.count(opOrphanExternal, secretApp))
			require.Equal(t, 1, e.k.written(es))
			requireAdopted(t, e)
		}},
		{Name: "409 someone else's write, still generator-backed", Setup: respec(adopt, func(e *env) {
			adoptable(e)
			e.k.script(on(opOrphanExternal, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) { k.Touch(grExternal, secretApp) }))))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			res := firstRecordOf(r, store.RecordAuthorityResult, stepOrphanExternalSecret, es)
			require.Equal(t, "unknown/precondition-failed", string(res.Status)+"/"+string(res.Reason))
			require.EqualValues(t, 409, workflowtest.Fields(res.Detail)["code"])
			require.Equal(t, []string{"orphan-external-secret externalsecret/shop-app not-applied/resource-version-changed"},
				r.trail(store.RecordResolution, stepOrphanExternalSecret))
			calls := callsOf(r, stepOrphanExternalSecret, es)
			require.Len(t, calls, 2)
			require.NotEqual(t, calls[0].ResourceVersion, calls[1].ResourceVersion, "sent again with the new read's preconditions")
			requireAdopted(t, e)
		}},
		{Name: "409 someone switched it to a remote store", Setup: respec(adopt, func(e *env) {
			adoptable(e)
			e.k.script(on(opOrphanExternal, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.editExternal(secretApp, remoteES)
			}))))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonNotGeneratorBacked, r.Ending())
			require.Equal(t, secretApp, r.summary()["externalSecret"])
			require.True(t, e.externalExists(secretApp), "their ExternalSecret stays")
			require.True(t, e.generatorExists(generatorApp), "nothing after the refusal runs")
			require.Zero(t, e.k.written(es))
			require.Len(t, e.secret(secretApp).OwnerReferences, 1, "the Secret is not touched")
		}},
		{Name: "409 someone replaced it", Setup: respec(adopt, func(e *env) {
			adoptable(e)
			e.k.script(on(opOrphanExternal, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.Remove(grExternal, secretApp)
				k.putExternal(generatorBackedES(secretApp))
			}))))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonExternalReplaced, r.Ending())
			require.True(t, e.externalExists(secretApp), "the new one is someone else's: not deleted")
			require.Equal(t, 1, e.k.count(opOrphanExternal, secretApp))
			require.Equal(t, "m-1:run-1", r.summary()["run"])
		}},
		{Name: "404 someone deleted it first", Setup: respec(adopt, func(e *env) {
			adoptable(e)
			e.k.script(on(opOrphanExternal, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) { k.Remove(grExternal, secretApp) }))))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"orphan-external-secret externalsecret/shop-app applied/absent"}, r.trail(store.RecordAuthorityResult, stepOrphanExternalSecret))
			requireAdopted(t, e)
			require.Zero(t, e.k.written(es))
		}},
		{Name: "500 not applied", Setup: respec(adopt, func(e *env) {
			adoptable(e)
			e.k.script(on(opOrphanExternal, secretApp, kubetest.Status(kubetest.ServerError())))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, 2, e.k.count(opOrphanExternal, secretApp))
			requireAdopted(t, e)
		}},
		{Name: "not gone within the bound", Setup: respec(adopt, func(e *env) {
			adoptable(e)
			e.k.gcHold[secretApp] = 100
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "uncertain/"+ReasonExternalNotGone, r.Ending())
			require.True(t, e.generatorExists(generatorApp), "no generator is deleted while the ExternalSecret may still write")
			require.Empty(t, callsOf(r, stepCreateSecret, "secret/"+secretBus), "nor any Secret created")
			e.k.gcHold[secretApp] = 0
			again := e.run()
			require.Equal(t, "completed", again.Ending(), "a rerun settles it")
			require.Equal(t, r.op.MutationID, again.op.MutationID, "by resuming the same operation")
			require.Equal(t, 1, e.k.count(opOrphanExternal, secretApp), "never deleted twice")
			requireAdopted(t, e)
		}},
		{Name: "replaced while waiting", Setup: respec(adopt, func(e *env) {
			adoptable(e)
			e.k.gcHold[secretApp] = 100
			e.k.script(on(opGetExternal, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.Remove(grExternal, secretApp)
				k.putExternal(generatorBackedES(secretApp))
			})).After(2)))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonExternalReplaced, r.Ending())
			require.True(t, e.generatorExists(generatorApp))
		}},
		{Name: "already being deleted by someone", Setup: respec(adopt, func(e *env) {
			adoptable(e)
			e.k.gcHold[secretApp] = 2
			e.k.script(on(opGetExternal, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.editExternal(secretApp, func(es *unstructured.Unstructured) {
					now := metav1.Now()
					es.SetDeletionTimestamp(&now)
				})
			}))))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Zero(t, e.k.count(opOrphanExternal, secretApp), "no delete of its own")
			require.Equal(t, float64(0), r.summary()["externalSecretsDeleted"])
			require.False(t, e.externalExists(secretApp))
		}},
		{Name: "not generator-backed: refused before any write", Setup: respec(adopt, func(e *env) {
			adoptable(e)
			e.k.editExternal(secretApp, remoteES)
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonNotGeneratorBacked, r.Ending())
			require.Equal(t, true, r.summary()["listedInAdopt"])
			require.Empty(t, r.calls(), "no call at all")
			require.Zero(t, e.k.WriteCount())
		}},
		{Name: "writes another Secret: refused before any write", Setup: respec(adopt, func(e *env) {
			adoptable(e)
			e.k.editExternal(secretApp, func(es *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(es.Object, "elsewhere", "spec", "target", "name")
			})
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonTargetMismatch, r.Ending())
			require.Empty(t, r.calls())
		}},
		{Name: "unlisted generator-backed ExternalSecret is adopted too", Setup: func(e *env) {
			es := e.k.putExternal(generatorBackedES(secretBus))
			e.k.putSecret(theirSecret(secretBus, map[string]string{"user": "bus", "password": "from-generator"}, ownedBy(es)))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, false, workflowtest.Fields(callOf(r, stepOrphanExternalSecret, "externalsecret/"+secretBus).Detail)["listedInAdopt"])
			require.False(t, e.externalExists(secretBus))
			s := e.secret(secretBus)
			require.Equal(t, "from-generator", string(s.Data["password"]))
			require.Empty(t, s.OwnerReferences)
			require.NotContains(t, s.Labels, LabelArgoInstance)
		}},
		{Name: "unlisted and not generator-backed: refused", Setup: func(e *env) {
			es := generatorBackedES(secretBus)
			remoteES(es)
			e.k.putExternal(es)
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonNotGeneratorBacked, r.Ending())
			require.Equal(t, false, r.summary()["listedInAdopt"])
			require.Zero(t, e.k.WriteCount())
		}},
	})
}

// TestDeleteGeneratorTable: the delete-generator call (DELETE with the UID
// and resourceVersion of the read journaled with it), once no ExternalSecret
// can regenerate a value.
func TestDeleteGeneratorTable(t *testing.T) {
	t.Parallel()
	gen := "password/" + generatorApp
	withGenerator := func(e *env) { e.k.putGenerator(generatorApp) }
	runTable(t, []row{
		{Name: "applied", Setup: respec(withAdoption, withGenerator), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.False(t, e.generatorExists(generatorApp))
			require.Equal(t, 1, e.k.written(gen))
			require.Equal(t, float64(1), r.summary()["generatorsDeleted"])
			obs := recordOf(r, store.RecordObservation, stepReadGenerator, gen)
			require.Equal(t, store.Status("present"), obs.Status)
			require.Equal(t, obs.UID, callOf(r, stepDeleteGenerator, gen).UID, "the delete names the read's UID")
			require.Equal(t, obs.ResourceVersion, callOf(r, stepDeleteGenerator, gen).ResourceVersion)
		}},
		{Name: "absent: journaled, not deleted", Setup: respec(withAdoption), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"read-generator password/shop-app-password absent/"}, r.trail(store.RecordObservation, stepReadGenerator))
			require.Equal(t, float64(0), r.summary()["generatorsDeleted"])
			require.Zero(t, e.k.count(opDeleteGenerator, generatorApp))
		}},
		{Name: "lost-after-apply", Setup: respec(withAdoption, func(e *env) {
			withGenerator(e)
			e.k.script(on(opDeleteGenerator, generatorApp, kubetest.AppliedLost()))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"delete-generator password/shop-app-password ours/gone"}, r.trail(store.RecordResolution, ""))
			require.Equal(t, float64(1), r.summary()["generatorsDeleted"])
			require.Equal(t, 1, e.k.count(opDeleteGenerator, generatorApp))
		}},
		{Name: "lost-before-apply", Setup: respec(withAdoption, func(e *env) {
			withGenerator(e)
			e.k.script(on(opDeleteGenerator, generatorApp, kubetest.LostBefore()))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"delete-generator password/shop-app-password not-applied/resource-version-unchanged"}, r.trail(store.RecordResolution, ""))
			require.Equal(t, 2, e.k.count(opDeleteGenerator, generatorApp))
			require.False(t, e.generatorExists(generatorApp))
		}},
		{Name: "409 someone else's write", Setup: respec(withAdoption, func(e *env) {
			withGenerator(e)
			e.k.script(on(opDeleteGenerator, generatorApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) { k.Touch(grGenerators, generatorApp) }))))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"delete-generator password/shop-app-password not-applied/resource-version-changed"}, r.trail(store.RecordResolution, ""))
			require.False(t, e.generatorExists(generatorApp))
		}},
		{Name: "409 someone replaced it", Setup: respec(withAdoption, func(e *env) {
			withGenerator(e)
			e.k.script(on(opDeleteGenerator, generatorApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.Remove(grGenerators, generatorApp)
				k.putGenerator(generatorApp)
			}))))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"delete-generator password/shop-app-password ours/replaced-not-deleted"}, r.trail(store.RecordResolution, ""))
			require.True(t, e.generatorExists(generatorApp), "someone else's new generator is not deleted")
			require.Equal(t, 1, e.k.count(opDeleteGenerator, generatorApp))
		}},
		{Name: "404 someone deleted it first", Setup: respec(withAdoption, func(e *env) {
			withGenerator(e)
			e.k.script(on(opDeleteGenerator, generatorApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) { k.Remove(grGenerators, generatorApp) }))))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"delete-generator password/shop-app-password applied/absent"}, r.trail(store.RecordAuthorityResult, stepDeleteGenerator))
			require.Equal(t, float64(0), r.summary()["generatorsDeleted"], "not counted: this run deleted nothing")
		}},
		{Name: "500 not applied", Setup: respec(withAdoption, func(e *env) {
			withGenerator(e)
			e.k.script(on(opDeleteGenerator, generatorApp, kubetest.Status(kubetest.ServerError())))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, 2, e.k.count(opDeleteGenerator, generatorApp))
			require.False(t, e.generatorExists(generatorApp))
		}},
	})
}
