package credentials

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/kubetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// readFails is a read answered 500 (nothing applied, nothing learned).
func readFails(op opKind, name string) scripted {
	return on(op, name, kubetest.Status(kubetest.ServerError()))
}

// requireUnavailable: the run stopped on a read the API server did not
// answer, before anything was decided from it.
func requireUnavailable(t *testing.T, r result) {
	t.Helper()
	var unavailable *workflow.Unavailable
	require.ErrorAs(t, r.err, &unavailable)
	require.Equal(t, "kubernetes", unavailable.Dependency)
	if len(r.calls()) > 0 {
		require.Equal(t, "uncertain/interrupted", r.Ending(), "after a call was sent, a rerun settles it")
	} else {
		require.Equal(t, "unavailable/kubernetes", r.Ending(), "before any call: a plain dependency failure")
	}
}

// TestReadsTable: reads that fail or find something changed, in Decide
// (the run stops: unavailable, or uncertain once calls were sent) and in
// Resolve (the verdict is undetermined: uncertain, and a rerun settles).
func TestReadsTable(t *testing.T) {
	t.Parallel()
	// settlesOnRerun: the first run ended uncertain with the call open; the
	// rerun, with the API server answering, settles it without sending the
	// call again when it was applied.
	settlesOnRerun := func(t *testing.T, e *env, r result, op opKind, name string, sends int) {
		t.Helper()
		require.Equal(t, "uncertain/read-failed", r.Ending())
		require.Equal(t, store.StateResolving, r.op.State)
		again := e.run()
		require.Equal(t, r.op.MutationID, again.op.MutationID)
		require.Equal(t, "completed", again.Ending())
		require.Equal(t, sends, e.k.count(op, name))
	}
	runTable(t, []row{
		{Name: "resolve create: the read fails", Setup: func(e *env) {
			e.k.script(on(opCreateSecret, secretApp, kubetest.AppliedLost()), afterOne(readFails(opGetSecret, secretApp)))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, []string{"create-secret secret/shop-app undetermined/read-failed"}, r.trail(store.RecordResolution, ""),
				"the verdict is journaled before the run ends")
			settlesOnRerun(t, e, r, opCreateSecret, secretApp, 1)
			e.requirePlanned(secretApp, true)
		}},
		{Name: "resolve patch: the read fails", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.AppliedLost()), on(opGetSecret, secretApp, kubetest.Status(kubetest.ServerError()).After(1)))
		}, Check: func(t *testing.T, e *env, r result) {
			settlesOnRerun(t, e, r, opPatchSecret, secretApp, 1)
		}},
		{Name: "resolve orphan: the read fails", Setup: respec(withAdoption, func(e *env) {
			adoptable(e)
			e.k.script(on(opOrphanExternal, secretApp, kubetest.AppliedLost()),
				on(opGetExternal, secretApp, kubetest.Status(kubetest.ServerError()).After(2)))
		}), Check: func(t *testing.T, e *env, r result) {
			settlesOnRerun(t, e, r, opOrphanExternal, secretApp, 1)
			requireAdopted(t, e)
		}},
		{Name: "resolve generator delete: the read fails", Setup: respec(withAdoption, func(e *env) {
			e.k.putGenerator(generatorApp)
			e.k.script(on(opDeleteGenerator, generatorApp, kubetest.AppliedLost()),
				on(opGetGenerator, generatorApp, kubetest.Status(kubetest.ServerError()).After(1)))
		}), Check: func(t *testing.T, e *env, r result) {
			settlesOnRerun(t, e, r, opDeleteGenerator, generatorApp, 1)
		}},
		{Name: "resolve generator delete: someone else's delete in progress", Setup: respec(withAdoption, func(e *env) {
			e.k.putGenerator(generatorApp)
			e.k.script(on(opDeleteGenerator, generatorApp, kubetest.LostBefore()),
				on(opGetGenerator, generatorApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
					k.Edit(grGenerators, generatorApp, func(o kubetest.Object) {
						now := metav1.Now()
						o.SetDeletionTimestamp(&now)
					})
				})).After(1)))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"delete-generator password/shop-app-password ours/deleting"}, r.trail(store.RecordResolution, ""))
			require.Equal(t, 1, e.k.count(opDeleteGenerator, generatorApp))
		}},
		{Name: "resolve pod delete: the read fails", Setup: respec(withServers, func(e *env) {
			staleServer(e)
			e.k.script(on(opDeletePod, podApp, kubetest.AppliedLost()),
				on(opGetPod, podApp, kubetest.Status(kubetest.ServerError()).After(1)))
		}), Check: func(t *testing.T, e *env, r result) {
			settlesOnRerun(t, e, r, opDeletePod, podApp, 1)
		}},
		{Name: "resolve pod delete: someone else's delete in progress", Setup: respec(withServers, func(e *env) {
			staleServer(e)
			e.k.script(on(opDeletePod, podApp, kubetest.LostBefore()),
				on(opGetPod, podApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
					k.editPod(podApp, func(p *corev1.Pod) {
						now := metav1.Now()
						p.DeletionTimestamp = &now
					})
				})).After(1)),
				on(opGetPod, podApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
					k.Remove(kubetest.Pods, podApp)
					k.replace(podApp)
				}))))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"delete-pod pod/shop-app-0 ours/terminating"}, r.trail(store.RecordResolution, ""))
			require.Equal(t, 1, e.k.count(opDeletePod, podApp))
			require.Zero(t, e.k.written("pod/"+podApp))
		}},
		{Name: "resolve pod delete: gone, its replacement late", Setup: respec(withServers, func(e *env) {
			staleServer(e)
			e.k.noReplacement[podApp] = true
			e.k.script(on(opDeletePod, podApp, kubetest.AppliedLost()),
				on(opGetPod, podApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
					k.noReplacement[podApp] = false
					k.replace(podApp)
				})).After(3)))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"delete-pod pod/shop-app-0 ours/absent"}, r.trail(store.RecordResolution, ""))
			require.Equal(t, []string{"wait-replacement pod/shop-app-0 ready/"}, r.trail(store.RecordObservation, "wait-replacement"))
			require.Equal(t, map[string]any{"accepted": 1.0, "skipped": 1.0, "repaired": 1.0}, r.summary()["servers"])
		}},
		{Name: "the replacement starts unready, then is ready", Setup: respec(withServers, func(e *env) {
			staleServer(e)
			e.k.script(on(opGetPod, podApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.editPod(podApp, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending })
			})).After(1)), on(opGetPod, podApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.editPod(podApp, func(p *corev1.Pod) {
					p.Status.Phase = corev1.PodRunning
					p.Status.Conditions = nil
				})
			}))))
			e.k.script(on(opGetPod, podApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.editPod(podApp, func(p *corev1.Pod) {
					p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				})
			}))))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"wait-replacement pod/shop-app-0 ready/"}, r.trail(store.RecordObservation, "wait-replacement"))
			require.Equal(t, 1, e.k.count(opDeletePod, podApp))
		}},
		{Name: "decide: an ExternalSecret read fails", Setup: func(e *env) {
			e.k.script(readFails(opGetExternal, secretBus))
		}, Check: func(t *testing.T, e *env, r result) {
			requireUnavailable(t, r)
			require.Equal(t, store.StatePrepared, r.op.State, "nothing journaled, nothing sent")
			require.Zero(t, e.k.WriteCount())
		}},
		{Name: "decide: the read before an orphan delete fails", Setup: respec(withAdoption, func(e *env) {
			adoptable(e)
			e.k.script(on(opGetExternal, secretApp, kubetest.Status(kubetest.ServerError()).After(1)))
		}), Check: func(t *testing.T, e *env, r result) {
			requireUnavailable(t, r)
			require.Zero(t, e.k.WriteCount())
		}},
		{Name: "decide: the wait's read fails", Setup: respec(withAdoption, func(e *env) {
			adoptable(e)
			e.k.script(on(opGetExternal, secretApp, kubetest.Status(kubetest.ServerError()).After(2)))
		}), Check: func(t *testing.T, e *env, r result) {
			requireUnavailable(t, r)
			require.Equal(t, 1, e.k.written("externalsecret/"+secretApp))
		}},
		{Name: "decide: the orphan read finds it gone", Setup: respec(withAdoption, func(e *env) {
			adoptable(e)
			e.k.script(on(opGetExternal, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) { k.Remove(grExternal, secretApp) })).After(1)))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Contains(t, r.trail(store.RecordObservation, stepReadExternalSecret), "read-external-secret externalsecret/shop-app absent/")
			require.Zero(t, e.k.count(opOrphanExternal, secretApp))
		}},
		{Name: "decide: switched to a remote store before the orphan read", Setup: respec(withAdoption, func(e *env) {
			adoptable(e)
			e.k.script(on(opGetExternal, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) { k.editExternal(secretApp, remoteES) })).After(1)))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonNotGeneratorBacked, r.Ending())
			require.Zero(t, e.k.WriteCount())
		}},
		{Name: "decide: a generator read fails", Setup: respec(withAdoption, func(e *env) {
			e.k.putGenerator(generatorApp)
			e.k.script(readFails(opGetGenerator, generatorApp))
		}), Check: func(t *testing.T, e *env, r result) {
			requireUnavailable(t, r)
		}},
		{Name: "decide: the read of a Secret to patch fails", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opGetSecret, secretApp, kubetest.Status(kubetest.ServerError())))
		}, Check: func(t *testing.T, e *env, r result) {
			requireUnavailable(t, r)
			require.Zero(t, e.k.written("secret/"+secretBus), "stopped before any write; a rerun does it all")
			again := e.run()
			require.Equal(t, "completed", again.Ending())
			require.Equal(t, counts(2, 1, 1, 1, 0), again.secretsCount())
		}},
		{Name: "decide: a Secret deleted before its read is created", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opGetSecret, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) { k.Remove(kubetest.Secrets, secretApp) }))))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, counts(2, 2, 0, 0, 0), r.secretsCount(), "created by this run after all")
			e.requirePlanned(secretApp, true)
			require.Len(t, callsOf(r, stepCreateSecret, "secret/"+secretApp), 1)
		}},
		{Name: "decide: a pod read fails", Setup: respec(withServers, func(e *env) {
			e.k.script(readFails(opGetPod, podApp))
		}), Check: func(t *testing.T, e *env, r result) {
			requireUnavailable(t, r)
		}},
		{Name: "decide: the probe's Secret read fails", Setup: respec(withServers, func(e *env) {
			staleServer(e)
			e.k.script(readFails(opGetSecret, secretApp))
		}), Check: func(t *testing.T, e *env, r result) {
			requireUnavailable(t, r)
			require.Zero(t, e.k.count(opDeletePod, podApp))
		}},
		{Name: "decide: the probed Secret lost its password key", Setup: respec(withServers, func(e *env) {
			staleServer(e)
			e.k.script(on(opGetSecret, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.editSecret(secretApp, func(s *corev1.Secret) { delete(s.Data, "password") })
			})).After(1)))
		}), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "uncertain/"+ReasonProbeUnknown, r.Ending())
			require.Contains(t, r.trail(store.RecordProbe, ""), "probe-server pod/shop-app-0 unknown/password-key-absent")
			require.Zero(t, e.k.count(opDeletePod, podApp), "an unknown answer restarts nothing")
		}},
		{Name: "decide: the replacement's read fails while waiting", Setup: respec(withServers, func(e *env) {
			staleServer(e)
			e.k.noReplacement[podApp] = true
			e.k.script(on(opGetPod, podApp, kubetest.Status(kubetest.ServerError()).After(2)))
		}), Check: func(t *testing.T, e *env, r result) {
			requireUnavailable(t, r)
			require.Equal(t, 1, e.k.count(opDeletePod, podApp))
		}},
	})
}

// TestResolveUnknownStep: a call record of a step the family never sends
// is an error, not a verdict.
func TestResolveUnknownStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basePlan())
	run := &workflow.Run{Op: &store.Operation{MutationID: "m-1:run-1"}}
	_, err := e.family().Resolve(context.Background(), run, store.Record{Kind: store.RecordAuthorityCall, Step: "replace-secret", Target: store.SecretTarget(nsShop, "x")})
	require.ErrorContains(t, err, "unknown step replace-secret")
}

// TestGeneratorBacked: only dataFrom entries that all name a generator
// (and no remote data, extract or find) are generator-backed.
func TestGeneratorBacked(t *testing.T) {
	t.Parallel()
	from := func(items ...any) *unstructured.Unstructured {
		es := generatorBackedES("x")
		_ = unstructured.SetNestedSlice(es.Object, items, "spec", "dataFrom")
		return es
	}
	gen := map[string]any{"sourceRef": map[string]any{"generatorRef": map[string]any{"kind": "Password", "name": "p"}}}
	remote := generatorBackedES("x")
	remoteES(remote)
	noDataFrom := generatorBackedES("x")
	unstructured.RemoveNestedField(noDataFrom.Object, "spec", "dataFrom")
	cases := []struct {
		name string
		es   *unstructured.Unstructured
		want bool
	}{
		{"generator", from(gen), true},
		{"remote data beside it", remote, false},
		{"no dataFrom", noDataFrom, false},
		{"an entry not an object", from("x"), false},
		{"a store ref", from(map[string]any{"sourceRef": map[string]any{"storeRef": map[string]any{"name": "vault"}}}), false},
		{"extract beside the generator", from(map[string]any{"sourceRef": gen["sourceRef"], "extract": map[string]any{"key": "k"}}), false},
		{"find beside the generator", from(map[string]any{"sourceRef": gen["sourceRef"], "find": map[string]any{"name": map[string]any{}}}), false},
		{"one generator, one store", from(gen, map[string]any{"sourceRef": map[string]any{"storeRef": map[string]any{"name": "vault"}}}), false},
	}
	for _, c := range cases {
		require.Equal(t, c.want, generatorBacked(c.es), c.name)
	}
}

// TestForeseeCreate: what a create would answer, from a read (the
// answer keyledger plan takes for it).
func TestForeseeCreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basePlan())
	e.k.putSecret(theirSecret(secretApp, map[string]string{"password": "x"}))
	f := e.family()
	ctx := context.Background()
	a, ok, err := f.foreseeCreate(secretApp)(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, workflow.Unknown, a.Status)
	require.Equal(t, 409, a.Code)
	_, ok, err = f.foreseeCreate(secretBus)(ctx)
	require.NoError(t, err)
	require.False(t, ok, "an absent Secret: the create is taken as applied")
	e.k.script(readFails(opGetSecret, secretBus))
	_, _, err = f.foreseeCreate(secretBus)(ctx)
	var unavailable *workflow.Unavailable
	require.True(t, errors.As(err, &unavailable))
}

// TestBoundedWait: the run's waiter stops when the condition holds, fails,
// the bound passes (not done, no error) or the run's context ends; only
// the look that runs into the bound waits (100 ms).
func TestBoundedWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	looks := 0
	wait := bounded(time.Hour, time.Hour)
	done, err := wait(ctx, func(context.Context) (bool, error) { looks++; return true, nil })
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, 1, looks, "the first look is at once")
	boom := errors.New("read failed")
	_, err = wait(ctx, func(context.Context) (bool, error) { return false, boom })
	require.ErrorIs(t, err, boom)
	done, err = bounded(0, time.Hour)(ctx, func(context.Context) (bool, error) { return false, nil })
	require.NoError(t, err)
	require.False(t, done, "the bound passed: not done, no error")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = wait(canceled, func(context.Context) (bool, error) { return false, nil })
	require.ErrorIs(t, err, context.Canceled, "the run ending is not the bound passing")
	// A look is not cut at the bound: a client (or server) that gives up a
	// moment before its request's deadline would fail the look before the
	// bound had passed, and the wait with it.
	looks = 0
	done, err = bounded(100*time.Millisecond, 10*time.Millisecond)(ctx, func(look context.Context) (bool, error) {
		looks++
		if deadline, ok := look.Deadline(); ok && time.Until(deadline) < 50*time.Millisecond {
			return false, errors.New("gave up just before the deadline")
		}
		return false, nil
	})
	require.NoError(t, err, "the bound passed: not done, no error")
	require.False(t, done)
	require.Greater(t, looks, 1)
	require.EqualError(t, errReplaced, "replaced by another object of the same name")
}

// TestDryRun: keyledger plan drives the same decisions with every call held
// back: it waits for nothing, probes nothing, writes nothing, and lists the
// calls a run would send.
func TestDryRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withServers(withAdoption(basePlan())))
	adoptable(e)
	staleServer(e)
	plan := e.plan()
	plan.Access, plan.Rights = nil, nil // the permission matrix is the integration suite's
	res, err := workflow.DryRun(context.Background(), workflow.Deps{
		OpenStore: func(context.Context) (workflow.Store, error) { return e.j, nil }}, plan)
	require.NoError(t, err)
	require.Equal(t, "new", res.Journal)
	require.Empty(t, res.Stopped)
	require.Equal(t, workflow.OutcomeCompleted, res.Outcome)
	var calls []string
	for _, c := range res.Calls() {
		calls = append(calls, c.Step+" "+c.Target.String())
	}
	require.Equal(t, []string{"orphan-external-secret externalsecret/shop-app", "delete-generator password/shop-app-password",
		"patch-secret secret/shop-app", "create-secret secret/shop-bus"}, calls, "the Secret found in place is never POSTed")
	var probes []string
	for _, r := range res.Records {
		if r.Kind == store.RecordProbe {
			probes = append(probes, r.Target.String()+" "+string(r.Status))
		}
	}
	require.Equal(t, []string{"pod/shop-app-0 planned", "pod/shop-bus-0 skipped"}, probes, "listed, never contacted")
	require.Zero(t, e.k.WriteCount(), "nothing written")
	require.Empty(t, e.k.probeLog, "no server contacted")
	require.True(t, e.externalExists(secretApp))
}

// afterOne lets the first matching request pass (the read before the
// creates) and applies f to the next.
func afterOne(f scripted) scripted { f.fault = f.fault.After(1); return f }
