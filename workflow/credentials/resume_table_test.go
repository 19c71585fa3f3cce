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
	created := func(t *testing.T, e *env, r result) {
		t.Helper()
		require.Equal(t, "completed", r.Ending())
		require.Equal(t, counts(2, 2, 0, 0, 0), r.secretsCount())
		for _, n := range []string{secretApp, secretBus} {
			require.Equal(t, 1, e.k.written("secret/"+n), "%s written once", n)
			e.requirePlanned(n, true)
		}
	}
	rows := []row{
		{Name: "calling: died before the creates were sent", Setup: diedAt(store.StateCalling, stepCreateSecret, true, store.StateCalling, nil),
			Check: resumed(func(t *testing.T, e *env, r result) {
				created(t, e, r)
				require.Equal(t, []string{"create-secret secret/shop-app lost/no-result-recorded", "create-secret secret/shop-bus lost/no-result-recorded",
					"create-secret secret/shop-app applied/created", "create-secret secret/shop-bus applied/created"}, r.trail(store.RecordAuthorityResult, ""))
				require.Equal(t, []string{"create-secret secret/shop-app not-applied/absent", "create-secret secret/shop-bus not-applied/absent"},
					r.trail(store.RecordResolution, ""))
			})},
		{Name: "calling: died after the creates were sent", Setup: diedAt(store.StateAnswered, stepCreateSecret, false, store.StateCalling, nil),
			Check: resumed(func(t *testing.T, e *env, r result) {
				created(t, e, r)
				require.Equal(t, []string{"create-secret secret/shop-app ours/created-by-this-mutation", "create-secret secret/shop-bus ours/created-by-this-mutation"},
					r.trail(store.RecordResolution, ""), "settled by the nonces journaled before the sends")
				require.Equal(t, 1, e.k.count(opCreateSecret, secretApp), "never sent again")
			})},
		{Name: "answered: died after the answers were journaled", Setup: diedAt(store.StateAnswered, stepCreateSecret, true, store.StateAnswered, nil),
			Check: resumed(func(t *testing.T, e *env, r result) {
				created(t, e, r)
				require.Empty(t, r.trail(store.RecordResolution, ""), "nothing to resolve")
				require.Equal(t, 1, e.k.count(opCreateSecret, secretApp))
			})},
		{Name: "resolving: died before the verdicts were journaled", Setup: diedAt(store.StateAnswered, stepCreateSecret, false, store.StateResolving, respec(nil, func(e *env) {
			e.k.script(on(opCreateSecret, secretApp, kubetest.AppliedLost()))
		})),
			Check: resumed(func(t *testing.T, e *env, r result) {
				created(t, e, r)
				require.Equal(t, []string{"create-secret secret/shop-app ours/created-by-this-mutation"}, r.trail(store.RecordResolution, ""))
				require.Equal(t, 1, e.k.count(opCreateSecret, secretApp))
			})},
		{Name: "resolving: a patch applied, its answer and the process lost", Setup: diedAt(store.StateAnswered, stepPatchSecret, false, store.StateResolving, respec(nil, func(e *env) {
			partial(e)
			e.k.script(on(opPatchSecret, secretApp, kubetest.AppliedLost()))
		})),
			Check: resumed(func(t *testing.T, e *env, r result) {
				require.Equal(t, "completed", r.Ending())
				require.Equal(t, counts(2, 1, 1, 1, 0), r.secretsCount())
				require.Equal(t, 1, e.k.count(opPatchSecret, secretApp))
				require.Equal(t, 1, e.k.written("secret/"+secretApp))
			})},
		{Name: "calling: died after the orphan delete was sent", Setup: diedAt(store.StateAnswered, stepOrphanExternalSecret, false, store.StateCalling, respec(withAdoption, adoptable)),
			Check: resumed(func(t *testing.T, e *env, r result) {
				require.Equal(t, "completed", r.Ending())
				require.Equal(t, []string{"orphan-external-secret externalsecret/shop-app ours/gone"}, r.trail(store.RecordResolution, stepOrphanExternalSecret))
				require.Equal(t, 1, e.k.count(opOrphanExternal, secretApp))
				require.Equal(t, float64(1), r.summary()["externalSecretsDeleted"])
				requireAdopted(t, e)
			})},
		{Name: "calling: died before the orphan delete was sent", Setup: diedAt(store.StateCalling, stepOrphanExternalSecret, true, store.StateCalling, respec(withAdoption, adoptable)),
			Check: resumed(func(t *testing.T, e *env, r result) {
				require.Equal(t, "completed", r.Ending())
				require.Equal(t, []string{"orphan-external-secret externalsecret/shop-app not-applied/resource-version-unchanged"},
					r.trail(store.RecordResolution, stepOrphanExternalSecret))
				require.Equal(t, 1, e.k.count(opOrphanExternal, secretApp))
				requireAdopted(t, e)
			})},
		{Name: "answered: died after the generator delete was journaled", Setup: diedAt(store.StateAnswered, stepDeleteGenerator, true, store.StateAnswered, respec(withAdoption, adoptable)),
			Check: resumed(func(t *testing.T, e *env, r result) {
				require.Equal(t, "completed", r.Ending())
				require.Equal(t, float64(1), r.summary()["generatorsDeleted"])
				require.Equal(t, float64(1), r.summary()["externalSecretsDeleted"], "counted from the journal, not from the dead process")
				require.Equal(t, 1, e.k.count(opDeleteGenerator, generatorApp))
				requireAdopted(t, e)
			})},
		{Name: "calling: died after the pod delete was sent", Setup: diedAt(store.StateAnswered, stepDeletePod, false, store.StateCalling, respec(withServers, staleServer)),
			Check: resumed(func(t *testing.T, e *env, r result) {
				require.Equal(t, "completed", r.Ending())
				require.Equal(t, []string{"delete-pod pod/shop-app-0 ours/replaced"}, r.trail(store.RecordResolution, ""))
				require.Equal(t, 1, e.k.count(opDeletePod, podApp))
				require.Equal(t, map[string]any{"accepted": 1.0, "skipped": 1.0, "repaired": 1.0}, r.summary()["servers"],
					"the refused probe of the dead process is in the journal")
			})},
	}
	runTable(t, rows)
}

// diedAt is the Setup of a resume row: the env setup makes (nil: basePlan
// as it is), then a first process that dies at the transition to state to
// of step (committed: after its commit) and leaves the operation in left.
func diedAt(to store.State, step string, committed bool, left store.State, setup func(*env)) func(*env) {
	return func(e *env) {
		e.t.Helper()
		if setup != nil {
			setup(e)
		}
		e.crash = crashOnce(to, step, committed)
		first := e.run()
		require.ErrorIs(e.t, first.err, errCrash)
		require.Equal(e.t, left, first.op.State, "the journal holds where the process died")
		e.died = first.op.MutationID
	}
}

// resumed is the Check of a resume row: the run under test is the next
// process, resuming the operation the first one left; then check.
func resumed(check func(t *testing.T, e *env, r result)) func(t *testing.T, e *env, r result) {
	return func(t *testing.T, e *env, r result) {
		t.Helper()
		require.Equal(t, e.died, r.op.MutationID, "the next process resumes the same operation")
		check(t, e, r)
	}
}
