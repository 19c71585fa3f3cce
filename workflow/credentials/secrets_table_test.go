package credentials

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/kubetest"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// row is one scenario of a family table (workflowtest.Row): what the
// namespace holds, which faults are scripted before the first run (Setup,
// through respec when the plan differs from basePlan), then what must hold
// after it (Check, then env.Finish).
type row = workflowtest.Row[*env, result]

// rowEnv is a row's environment: basePlan changed by spec, then setup
// applied to the double (either may be nil).
func rowEnv(t *testing.T, spec func(Spec) Spec, setup func(*env)) *env {
	t.Helper()
	plan := basePlan()
	if spec != nil {
		plan = spec(plan)
	}
	e := newEnv(t, plan)
	if setup != nil {
		setup(e)
	}
	return e
}

// baseEnv is a row's environment before its Setup: basePlan.
func baseEnv(t *testing.T) *env { return newEnv(t, basePlan()) }

// respec is the Setup of a row whose plan is basePlan changed by spec: the
// env is made again for that plan, then each of setups is applied.
func respec(spec func(Spec) Spec, setups ...func(*env)) func(*env) {
	return func(e *env) {
		e.t.Helper()
		*e = *rowEnv(e.t, spec, nil)
		for _, setup := range setups {
			setup(e)
		}
	}
}

func runTable(t *testing.T, rows []row) {
	t.Helper()
	for _, r := range rows {
		require.NotNil(t, r.Check, "row %q checks what holds after the run", r.Name)
	}
	workflowtest.RunRows(t, baseEnv, rows)
}

// TestCreateSecretTable: the create-secret call (a batch of POSTs, each
// with a nonce whose digest is journaled before the send) against every
// answer the API server can give.
func TestCreateSecretTable(t *testing.T) {
	t.Parallel()
	runTable(t, []row{
		{Name: "applied", Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, counts(2, 2, 0, 0, 0), r.secretsCount())
			require.Equal(t, []string{"create-secret secret/shop-app applied/created", "create-secret secret/shop-bus applied/created"},
				r.trail(store.RecordAuthorityResult, ""))
			for _, n := range []string{secretApp, secretBus} {
				e.requirePlanned(n, true)
				require.Equal(t, 1, e.k.written("secret/"+n), "%s written once", n)
				require.Equal(t, 1, e.k.count(opGetSecret, n), "read once (absent) before it is created, not after")
			}
			require.Equal(t, nonceDigest(e.secret(secretApp).Annotations[AnnotationNonce]), callOf(r, stepCreateSecret, "secret/"+secretApp).Digest,
				"the call record holds the digest of the nonce the Secret carries")
		}},
		{Name: "lost-after-apply", Setup: func(e *env) {
			e.k.script(on(opCreateSecret, secretApp, kubetest.AppliedLost()))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, counts(2, 2, 0, 0, 0), r.secretsCount())
			require.Equal(t, []string{"create-secret secret/shop-app ours/created-by-this-mutation"}, r.trail(store.RecordResolution, ""))
			e.requirePlanned(secretApp, true)
			require.Equal(t, 1, e.k.written("secret/"+secretApp), "applied once, never sent again")
			require.Equal(t, 1, e.k.count(opCreateSecret, secretApp))
		}},
		{Name: "lost-before-apply", Setup: func(e *env) {
			e.k.script(on(opCreateSecret, secretApp, kubetest.LostBefore()))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, counts(2, 2, 0, 0, 0), r.secretsCount())
			require.Equal(t, []string{"create-secret secret/shop-app not-applied/absent"}, r.trail(store.RecordResolution, ""))
			require.Equal(t, 2, e.k.count(opCreateSecret, secretApp), "sent again after the read found it absent")
			require.Equal(t, 1, e.k.written("secret/"+secretApp))
			calls := callsOf(r, stepCreateSecret, "secret/"+secretApp)
			require.Len(t, calls, 2)
			require.NotEqual(t, calls[0].Digest, calls[1].Digest, "each attempt has its own nonce")
			require.Equal(t, calls[1].Digest, nonceDigest(e.secret(secretApp).Annotations[AnnotationNonce]))
		}},
		{Name: "409 someone else's Secret created right before ours", Setup: func(e *env) {
			e.k.script(on(opCreateSecret, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.putSecret(theirSecret(secretApp, map[string]string{"password": "theirs"}))
			}))))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, counts(2, 1, 1, 1, 0), r.secretsCount(), "kept and patched, never counted as created")
			require.Equal(t, []string{"create-secret secret/shop-app unknown/already-exists", "create-secret secret/shop-bus applied/created",
				"patch-secret secret/shop-app applied/patched"}, r.trail(store.RecordAuthorityResult, ""))
			require.Equal(t, []string{"create-secret secret/shop-app ours/kept-existing"}, r.trail(store.RecordResolution, ""))
			s := e.secret(secretApp)
			require.Equal(t, "theirs", string(s.Data["password"]), "an existing value is never replaced")
			require.Equal(t, "shop", s.Labels["app.kubernetes.io/part-of"], "what it lacked is patched in")
			require.NotContains(t, s.Annotations, AnnotationNonce)
			require.Equal(t, 1, e.k.written("secret/"+secretApp), "one patch, no create")
		}},
		{Name: "409 look-alike carrying keyledger's annotations and another nonce", Setup: func(e *env) {
			e.k.script(on(opCreateSecret, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.putSecret(theirSecret(secretApp, map[string]string{"password": "copied"}, func(s *corev1.Secret) {
					s.Annotations = map[string]string{AnnotationNonce: "0123456789abcdef0123456789abcdef", AnnotationCreatedBy: "m-1:run-1"}
					s.Labels = map[string]string{"app.kubernetes.io/part-of": "shop"}
				}))
			}))))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, counts(2, 1, 0, 1, 1), r.secretsCount())
			res := recordOf(r, store.RecordResolution, stepCreateSecret, "secret/"+secretApp)
			require.Equal(t, store.Reason("kept-existing"), res.Reason)
			require.Equal(t, true, workflowtest.Fields(res.Detail)["lookAlike"])
			require.Equal(t, "copied", string(e.secret(secretApp).Data["password"]))
			require.Zero(t, e.k.written("secret/"+secretApp), "complete: not written")
		}},
		{Name: "422 rejected", Setup: func(e *env) {
			e.k.script(on(opCreateSecret, secretApp, kubetest.Status(kubetest.Invalid("Secret", secretApp))))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/invalid", r.Ending())
			require.Equal(t, []any{"secret/" + secretBus}, r.summary()["applied"], "the refusal names what the batch applied")
			require.Equal(t, []any{"secret/" + secretApp}, r.summary()["notApplied"])
			require.Nil(t, e.secret(secretApp))
			require.Equal(t, 1, e.k.written("secret/"+secretBus))
			require.Equal(t, 1, e.k.count(opCreateSecret, secretApp), "a rejected create is not sent again")
		}},
		{Name: "500 not applied", Setup: func(e *env) {
			e.k.script(on(opCreateSecret, secretApp, kubetest.Status(kubetest.ServerError())))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"create-secret secret/shop-app not-applied/absent"}, r.trail(store.RecordResolution, ""))
			require.Equal(t, 2, e.k.count(opCreateSecret, secretApp))
			require.Equal(t, 1, e.k.written("secret/"+secretApp))
		}},
		{Name: "404 namespace absent every time", Setup: func(e *env) {
			e.k.script(on(opCreateSecret, secretApp, kubetest.Status(kubetest.NotFound(grNamespaces, nsShop)).Times(100)))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "uncertain/attempts-exhausted", r.Ending())
			require.Equal(t, MaxAttempts, e.k.count(opCreateSecret, secretApp), "bounded by MaxAttempts")
			require.Nil(t, e.secret(secretApp))
			require.Equal(t, store.StateResolving, r.op.State, "left for a rerun to settle")
		}},
		{Name: "lost-after-apply then deleted by someone before the resolution's read", Setup: func(e *env) {
			e.k.script(on(opCreateSecret, secretApp, kubetest.AppliedLost()),
				on(opGetSecret, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) { k.Remove(kubetest.Secrets, secretApp) })).After(1)))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"create-secret secret/shop-app not-applied/absent"}, r.trail(store.RecordResolution, ""))
			require.Equal(t, 2, e.k.written("secret/"+secretApp), "created again: the plan is desired state")
			e.requirePlanned(secretApp, true)
		}},
		{Name: "lost-after-apply then replaced by someone else's", Setup: func(e *env) {
			e.k.script(on(opCreateSecret, secretApp, kubetest.AppliedLost()),
				on(opGetSecret, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
					k.Remove(kubetest.Secrets, secretApp)
					k.putSecret(theirSecret(secretApp, map[string]string{"password": "theirs"}, func(s *corev1.Secret) {
						s.Labels = map[string]string{"app.kubernetes.io/part-of": "shop"}
					}))
				})).After(1)))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"create-secret secret/shop-app ours/kept-existing"}, r.trail(store.RecordResolution, ""))
			require.Equal(t, counts(2, 1, 0, 1, 1), r.secretsCount(), "not counted as created: the nonce is not ours")
			require.Equal(t, "theirs", string(e.secret(secretApp).Data["password"]))
		}},
	})
}

// partial is a Secret someone else made, lacking the planned key and label.
func partial(e *env) {
	e.k.putSecret(theirSecret(secretApp, map[string]string{"other": "kept"}))
}

// TestPatchSecretTable: the patch-secret call (one JSON patch whose first
// operation tests the resourceVersion read) after a create found the
// Secret in place.
func TestPatchSecretTable(t *testing.T) {
	t.Parallel()
	patched := func(t *testing.T, e *env) {
		t.Helper()
		s := e.secret(secretApp)
		require.Equal(t, "kept", string(s.Data["other"]))
		require.Len(t, s.Data["password"], 32)
		require.Equal(t, "shop", s.Labels["app.kubernetes.io/part-of"])
	}
	runTable(t, []row{
		{Name: "applied", Setup: partial, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, counts(2, 1, 1, 1, 0), r.secretsCount())
			patched(t, e)
			require.Equal(t, 1, e.k.written("secret/"+secretApp))
			require.Equal(t, 1, e.k.count(opGetSecret, secretApp),
				"read once: the patch is built from the read that found it (the first planned Secret, before any create)")
			require.Zero(t, e.k.count(opCreateSecret, secretApp), "an existing Secret is never POSTed")
			kept := recordOf(r, store.RecordObservation, stepReadSecret, "secret/"+secretApp)
			require.Equal(t, false, workflowtest.Fields(kept.Detail)["complete"])
			require.Equal(t, []any{"password"}, workflowtest.Fields(kept.Detail)["addKeys"], "what it lacks is journaled with the patch")
			call := callOf(r, stepPatchSecret, "secret/"+secretApp)
			require.Equal(t, []any{"password"}, workflowtest.Fields(call.Detail)["addKeys"])
			require.Equal(t, []any{"app.kubernetes.io/part-of"}, workflowtest.Fields(call.Detail)["addLabels"])
		}},
		{Name: "lost-after-apply", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.AppliedLost()))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Contains(t, r.trail(store.RecordResolution, ""), "patch-secret secret/shop-app ours/complete")
			patched(t, e)
			require.Equal(t, 1, e.k.written("secret/"+secretApp), "not sent again")
			require.Equal(t, 1, e.k.count(opPatchSecret, secretApp))
		}},
		{Name: "lost-before-apply", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.LostBefore()))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Contains(t, r.trail(store.RecordResolution, ""), "patch-secret secret/shop-app not-applied/resource-version-unchanged")
			patched(t, e)
			require.Equal(t, 2, e.k.count(opPatchSecret, secretApp))
			require.Equal(t, 1, e.k.written("secret/"+secretApp))
		}},
		{Name: "422 someone else's write between read and patch", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.editSecret(secretApp, func(s *corev1.Secret) { s.Data["theirs"] = []byte("added") })
			}))))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"patch-secret secret/shop-app unknown/test-failed", "patch-secret secret/shop-app applied/patched"},
				r.trail(store.RecordAuthorityResult, stepPatchSecret))
			res := firstRecordOf(r, store.RecordAuthorityResult, stepPatchSecret, "secret/"+secretApp)
			require.EqualValues(t, 422, workflowtest.Fields(res.Detail)["code"])
			require.Contains(t, r.trail(store.RecordResolution, ""), "patch-secret secret/shop-app not-applied/resource-version-changed")
			patched(t, e)
			require.Equal(t, "added", string(e.secret(secretApp).Data["theirs"]), "their write is kept")
			require.Equal(t, 1, e.k.written("secret/"+secretApp), "the recomputed patch applied once")
		}},
		{Name: "422 someone else added the planned key first", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.editSecret(secretApp, func(s *corev1.Secret) { s.Data["password"] = []byte("theirs") })
			}))))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			s := e.secret(secretApp)
			require.Equal(t, "theirs", string(s.Data["password"]), "never overwritten")
			require.Equal(t, "shop", s.Labels["app.kubernetes.io/part-of"])
			calls := callsOf(r, stepPatchSecret, "secret/"+secretApp)
			require.Len(t, calls, 2)
			require.Nil(t, workflowtest.Fields(calls[1].Detail)["addKeys"], "the recomputed patch adds only the label")
		}},
		{Name: "404 deleted by someone before the patch", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) { k.Remove(kubetest.Secrets, secretApp) }))))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonSecretDeleted, r.Ending())
			require.Equal(t, "m-1:run-1", r.summary()["run"])
			require.Nil(t, e.secret(secretApp), "not recreated by this run")
		}},
		{Name: "made immutable by someone before the patch", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.editSecret(secretApp, kubetest.Frozen)
			}))))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonSecretImmutable, r.Ending())
			require.NotContains(t, e.secret(secretApp).Data, "password")
		}},
		{Name: "immutable before the run", Setup: func(e *env) {
			yes := true
			e.k.putSecret(theirSecret(secretApp, map[string]string{"other": "kept"}, func(s *corev1.Secret) { s.Immutable = &yes }))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonSecretImmutable, r.Ending())
			require.Zero(t, e.k.count(opPatchSecret, secretApp), "refused before any patch")
		}},
		{Name: "wrong type", Setup: func(e *env) {
			e.k.putSecret(theirSecret(secretApp, nil, func(s *corev1.Secret) { s.Type = corev1.SecretTypeDockerConfigJson }))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonSecretWrongType, r.Ending())
			res := r.records[len(r.records)-2]
			require.Equal(t, "read-secret secret/"+secretApp, res.Step+" "+res.Target.String(),
				"the read that found it is journaled with the refusal")
			require.Zero(t, e.k.count(opCreateSecret, secretApp), "never POSTed")
		}},
		{Name: "terminating", Setup: func(e *env) {
			e.k.putSecret(theirSecret(secretApp, map[string]string{"password": "x"}, kubetest.BeingDeleted))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/"+ReasonSecretTerminating, r.Ending())
		}},
		{Name: "500 not applied", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.Status(kubetest.ServerError())))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, 2, e.k.count(opPatchSecret, secretApp))
			patched(t, e)
		}},
		{Name: "409 conflict", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.Status(kubetest.Conflict(kubetest.Secrets, secretApp))))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, []string{"patch-secret secret/shop-app unknown/conflict", "patch-secret secret/shop-app applied/patched"},
				r.trail(store.RecordAuthorityResult, stepPatchSecret), "settled by re-reading, never read as a refusal")
			patched(t, e)
		}},
		{Name: "422 invalid rejected", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.Status(kubetest.Invalid("Secret", secretApp))))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "refused/invalid", r.Ending())
			require.Equal(t, 1, e.k.count(opPatchSecret, secretApp))
			require.NotContains(t, e.secret(secretApp).Data, "password")
		}},
	})
}

// TestReruns: a plan is desired state; each run is a new operation.
func TestReruns(t *testing.T) {
	t.Parallel()
	t.Run("a second run writes nothing", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, basePlan())
		first := e.run()
		require.Equal(t, "completed", first.Ending())
		rvs := map[string]string{secretApp: e.secret(secretApp).ResourceVersion, secretBus: e.secret(secretBus).ResourceVersion}
		mark := e.k.Mark()
		r := e.run()
		require.Equal(t, "existing", r.Ending())
		require.Equal(t, "m-1:run-2", r.op.MutationID, "a new operation")
		require.Equal(t, counts(2, 0, 0, 2, 2), r.secretsCount())
		for n, rv := range rvs {
			require.Equal(t, rv, e.secret(n).ResourceVersion, "%s not written", n)
			require.Zero(t, e.k.countSince(mark, opCreateSecret, n), "no POST: no password travels")
			require.Equal(t, 1, e.k.countSince(mark, opGetSecret, n), "one GET")
			require.Zero(t, e.k.countSince(mark, opPatchSecret, n))
		}
		require.Empty(t, r.trail(store.RecordResolution, ""))
		require.Equal(t, []string{"preparation", "observation read-external-secrets", "observation read-secrets", "completion"}, kinds(r.records),
			"a complete rerun journals four records")
		require.Equal(t, map[string]any{secretApp: "proven", secretBus: "proven"}, r.summary()["authorship"], "proven from run 1's creates")
	})
	t.Run("a Secret deleted by hand is recreated, alone", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, basePlan())
		require.Equal(t, "completed", e.run().Ending())
		app := e.secret(secretApp)
		e.k.Remove(kubetest.Secrets, secretBus)
		r := e.run()
		require.Equal(t, "completed", r.Ending())
		require.Equal(t, counts(2, 1, 0, 1, 1), r.secretsCount())
		require.Equal(t, app.ResourceVersion, e.secret(secretApp).ResourceVersion, "the other Secret is not written")
		require.Equal(t, 2, e.k.written("secret/"+secretBus))
		e.requirePlanned(secretBus, true)
		require.Equal(t, []string{"create-secret secret/shop-bus applied/created"}, r.trail(store.RecordAuthorityResult, ""),
			"only the absent Secret is POSTed")
	})
}

// kinds lists each record's kind (and, for observations, step).
func kinds(records []store.Record) []string {
	out := make([]string, len(records))
	for i, r := range records {
		out[i] = string(r.Kind)
		if r.Kind == store.RecordObservation {
			out[i] += " " + r.Step
		}
	}
	return out
}

// callsOf is every authority call of step on target.
func callsOf(r result, step, target string) []store.Record {
	var out []store.Record
	for _, rec := range r.records {
		if rec.Kind == store.RecordAuthorityCall && rec.Step == step && rec.Target.String() == target {
			out = append(out, rec)
		}
	}
	return out
}

func callOf(r result, step, target string) store.Record {
	return recordOf(r, store.RecordAuthorityCall, step, target)
}

// firstRecordOf is the oldest record of kind for step on target.
func firstRecordOf(r result, kind store.RecordKind, step, target string) store.Record {
	for _, rec := range r.records {
		if rec.Kind == kind && rec.Step == step && rec.Target.String() == target {
			return rec
		}
	}
	return store.Record{}
}

// recordOf is the newest record of kind for step on target.
func recordOf(r result, kind store.RecordKind, step, target string) store.Record {
	for i := len(r.records) - 1; i >= 0; i-- {
		if rec := r.records[i]; rec.Kind == kind && rec.Step == step && rec.Target.String() == target {
			return rec
		}
	}
	return store.Record{}
}

// TestDecisionEdges: a plan of one Secret, someone completing a kept
// Secret before the decision reads it, and randomness failing wherever a
// call is built (nothing is sent then).
func TestDecisionEdges(t *testing.T) {
	t.Parallel()
	fails := func(e *env) func(*kubetest.Server) { return func(*kubetest.Server) { e.random.failing.Store(true) } }
	noEntropy := func(t *testing.T, r result) {
		t.Helper()
		require.ErrorContains(t, r.err, "reading randomness")
	}
	runTable(t, []row{
		{Name: "one Secret: one call, not a batch", Setup: respec(func(s Spec) Spec { s.Secrets = s.Secrets[:1]; return s }), Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, counts(1, 1, 0, 0, 0), r.secretsCount())
			require.Equal(t, []string{"create-secret secret/shop-app"}, r.calls())
		}},
		{Name: "someone completes a Secret between the read and the patch", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.Theirs(e.k.their(func(k *credentialsAPI) {
				k.editSecret(secretApp, func(s *corev1.Secret) {
					s.Data["password"] = []byte("theirs")
					s.Labels = map[string]string{"app.kubernetes.io/part-of": "shop"}
				})
			}))))
		}, Check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, "theirs", string(e.secret(secretApp).Data["password"]), "the resourceVersion test kept their value")
			require.Equal(t, []string{"patch-secret secret/shop-app ours/complete"}, r.trail(store.RecordResolution, stepPatchSecret))
			require.Zero(t, e.k.count(opCreateSecret, secretApp))
		}},
		{Name: "randomness fails before the creates", Setup: func(e *env) { e.random.failing.Store(true) }, Check: func(t *testing.T, e *env, r result) {
			noEntropy(t, r)
			require.Empty(t, r.calls())
			require.Zero(t, e.k.WriteCount())
		}},
		{Name: "randomness fails building a patch", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opGetSecret, secretApp, kubetest.Theirs(fails(e))))
		}, Check: func(t *testing.T, e *env, r result) {
			noEntropy(t, r)
			require.Zero(t, e.k.count(opPatchSecret, secretApp))
		}},
		{Name: "randomness fails building a create's retry", Setup: func(e *env) {
			e.k.script(on(opCreateSecret, secretApp, kubetest.LostBefore()), on(opGetSecret, secretApp, kubetest.Theirs(fails(e)).After(1)))
		}, Check: func(t *testing.T, e *env, r result) {
			noEntropy(t, r)
			require.Equal(t, 1, e.k.count(opCreateSecret, secretApp))
			require.Nil(t, e.secret(secretApp))
		}},
		{Name: "randomness fails building a patch's retry", Setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.LostBefore()), on(opGetSecret, secretApp, kubetest.Theirs(fails(e)).After(1)))
		}, Check: func(t *testing.T, e *env, r result) {
			noEntropy(t, r)
			require.Equal(t, 1, e.k.count(opPatchSecret, secretApp))
		}},
	})
}

// TestConcurrentRuns: processes running the same plan at once either meet
// on one operation (the journal's compare-and-set decides which sends) or,
// once it has ended, start the next run, which finds everything in place;
// whatever the interleaving, each Secret is written exactly once.
func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basePlan())
	const processes = 4
	results := make([]result, processes)
	workflow.Each(processes, processes, func(i int) { results[i] = e.run() })
	for _, r := range results {
		require.NoError(t, r.err)
		if r.op.MutationID == "m-1:run-1" {
			// The process that ended it, or wrote part of it, reports its
			// outcome; one that met it and wrote nothing, existing.
			require.Contains(t, []string{"completed", "converged", "existing"}, r.Ending())
			require.Equal(t, counts(2, 2, 0, 0, 0), r.secretsCount(), "both created by this operation, whichever process saw the answers")
		} else {
			require.Equal(t, "existing", r.Ending(), "a later run writes nothing")
		}
	}
	for _, n := range []string{secretApp, secretBus} {
		require.Equal(t, 1, e.k.written("secret/"+n), "%s written once", n)
		e.requirePlanned(n, true)
	}
}
