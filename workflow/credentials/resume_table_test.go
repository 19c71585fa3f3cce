package credentials

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/kubetest"
)

// crashOnce kills the process at the first transition into to whose
// records name step: before the transition commits, or right after it
// (committed).
func crashOnce(to store.State, step string, committed bool) func(p store.TransitionParams) (bool, error) {
	done := false
	return func(p store.TransitionParams) (bool, error) {
		if done || p.To != to {
			return true, nil
		}
		for _, r := range p.Records {
			if r.Step == step {
				done = true
				return committed, errCrash
			}
		}
		return true, nil
	}
}

// TestResumeTable: a process dies at a transition; the next process
// (nothing in memory) resumes the operation from the state the journal
// holds, settles every call from the durable facts, and writes each object
// once.
func TestResumeTable(t *testing.T) {
	t.Parallel()
	type resume struct {
		name  string
		spec  func(Spec) Spec
		setup func(e *env)
		// crash names the transition the first process dies at.
		to        store.State
		step      string
		committed bool
		// left is the state the first process leaves the operation in.
		left  store.State
		check func(t *testing.T, e *env, r result)
	}
	created := func(t *testing.T, e *env, r result) {
		t.Helper()
		require.Equal(t, "completed", r.Ending())
		require.Equal(t, counts(2, 2, 0, 0, 0), r.secretsCount())
		for _, n := range []string{secretApp, secretBus} {
			require.Equal(t, 1, e.k.written("secret/"+n), "%s written once", n)
			e.requirePlanned(n, true)
		}
	}
	rows := []resume{
		{name: "calling: died before the creates were sent", to: store.StateCalling, step: stepCreateSecret, committed: true,
			left: store.StateCalling, check: func(t *testing.T, e *env, r result) {
				created(t, e, r)
				require.Equal(t, []string{"create-secret secret/shop-app lost/no-result-recorded", "create-secret secret/shop-bus lost/no-result-recorded",
					"create-secret secret/shop-app applied/created", "create-secret secret/shop-bus applied/created"}, r.trail(store.RecordAuthorityResult, ""))
				require.Equal(t, []string{"create-secret secret/shop-app not-applied/absent", "create-secret secret/shop-bus not-applied/absent"},
					r.trail(store.RecordResolution, ""))
			}},
		{name: "calling: died after the creates were sent", to: store.StateAnswered, step: stepCreateSecret,
			left: store.StateCalling, check: func(t *testing.T, e *env, r result) {
				created(t, e, r)
				require.Equal(t, []string{"create-secret secret/shop-app ours/created-by-this-mutation", "create-secret secret/shop-bus ours/created-by-this-mutation"},
					r.trail(store.RecordResolution, ""), "settled by the nonces journaled before the sends")
				require.Equal(t, 1, e.k.count(opCreateSecret, secretApp), "never sent again")
			}},
		{name: "answered: died after the answers were journaled", to: store.StateAnswered, step: stepCreateSecret, committed: true,
			left: store.StateAnswered, check: func(t *testing.T, e *env, r result) {
				created(t, e, r)
				require.Empty(t, r.trail(store.RecordResolution, ""), "nothing to resolve")
				require.Equal(t, 1, e.k.count(opCreateSecret, secretApp))
			}},
		{name: "resolving: died before the verdicts were journaled", setup: func(e *env) {
			e.k.script(on(opCreateSecret, secretApp, kubetest.AppliedLost()))
		}, to: store.StateAnswered, step: stepCreateSecret, left: store.StateResolving, check: func(t *testing.T, e *env, r result) {
			created(t, e, r)
			require.Equal(t, []string{"create-secret secret/shop-app ours/created-by-this-mutation"}, r.trail(store.RecordResolution, ""))
			require.Equal(t, 1, e.k.count(opCreateSecret, secretApp))
		}},
		{name: "resolving: a patch applied, its answer and the process lost", setup: func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.AppliedLost()))
		}, to: store.StateAnswered, step: stepPatchSecret, left: store.StateResolving, check: func(t *testing.T, e *env, r result) {
			require.Equal(t, "completed", r.Ending())
			require.Equal(t, counts(2, 1, 1, 1, 0), r.secretsCount())
			require.Equal(t, 1, e.k.count(opPatchSecret, secretApp))
			require.Equal(t, 1, e.k.written("secret/"+secretApp))
		}},
		{name: "calling: died after the orphan delete was sent", spec: withAdoption, setup: adoptable,
			to: store.StateAnswered, step: stepOrphanExternalSecret, left: store.StateCalling, check: func(t *testing.T, e *env, r result) {
				require.Equal(t, "completed", r.Ending())
				require.Equal(t, []string{"orphan-external-secret externalsecret/shop-app ours/gone"}, r.trail(store.RecordResolution, stepOrphanExternalSecret))
				require.Equal(t, 1, e.k.count(opOrphanExternal, secretApp))
				require.Equal(t, float64(1), r.summary()["externalSecretsDeleted"])
				requireAdopted(t, e)
			}},
		{name: "calling: died before the orphan delete was sent", spec: withAdoption, setup: adoptable,
			to: store.StateCalling, step: stepOrphanExternalSecret, committed: true, left: store.StateCalling, check: func(t *testing.T, e *env, r result) {
				require.Equal(t, "completed", r.Ending())
				require.Equal(t, []string{"orphan-external-secret externalsecret/shop-app not-applied/resource-version-unchanged"},
					r.trail(store.RecordResolution, stepOrphanExternalSecret))
				require.Equal(t, 1, e.k.count(opOrphanExternal, secretApp))
				requireAdopted(t, e)
			}},
		{name: "answered: died after the generator delete was journaled", spec: withAdoption, setup: adoptable,
			to: store.StateAnswered, step: stepDeleteGenerator, committed: true, left: store.StateAnswered, check: func(t *testing.T, e *env, r result) {
				require.Equal(t, "completed", r.Ending())
				require.Equal(t, float64(1), r.summary()["generatorsDeleted"])
				require.Equal(t, float64(1), r.summary()["externalSecretsDeleted"], "counted from the journal, not from the dead process")
				require.Equal(t, 1, e.k.count(opDeleteGenerator, generatorApp))
				requireAdopted(t, e)
			}},
		{name: "calling: died after the pod delete was sent", spec: withServers, setup: staleServer,
			to: store.StateAnswered, step: stepDeletePod, left: store.StateCalling, check: func(t *testing.T, e *env, r result) {
				require.Equal(t, "completed", r.Ending())
				require.Equal(t, []string{"delete-pod pod/shop-app-0 ours/replaced"}, r.trail(store.RecordResolution, ""))
				require.Equal(t, 1, e.k.count(opDeletePod, podApp))
				require.Equal(t, map[string]any{"accepted": 1.0, "skipped": 1.0, "repaired": 1.0}, r.summary()["servers"],
					"the refused probe of the dead process is in the journal")
			}},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := rowEnv(t, tc.spec, tc.setup)
			e.crash = crashOnce(tc.to, tc.step, tc.committed)
			first := e.run()
			require.ErrorIs(t, first.err, errCrash)
			require.Equal(t, tc.left, first.op.State, "the journal holds where the process died")
			again := e.run()
			require.Equal(t, first.op.MutationID, again.op.MutationID, "the next process resumes the same operation")
			tc.check(t, e, again)
			e.noOverwrite()
		})
	}
}
