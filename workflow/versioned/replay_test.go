package versioned

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/kubetest"
)

// forge journals, as anyone who can write the journal could, a completed
// operation for cmd that the API server never saw: its preparation, then
// records (calls and answers in the shape a run journals them) and a
// completion in one move. Nothing reaches the double.
func (e *env) forge(cmd *Command, records ...store.Record) {
	e.t.Helper()
	ctx := context.Background()
	op, created, err := e.j.Prepare(ctx, plan(cmd, e.api, e.limit).Prepare)
	require.NoError(e.t, err)
	require.True(e.t, created)
	records = append(records, store.Record{Kind: store.RecordCompletion, Step: "complete", Status: store.Status(workflow.OutcomeCompleted)})
	_, err = e.j.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCompleted,
		Revision: op.Revision, Outcome: string(workflow.OutcomeCompleted), Records: records})
	require.NoError(e.t, err)
}

// forgedUpdate is what a run of an update of live at version n journals:
// the archive of n (its nonce and a made-up answer UID), then the write of
// n+1, each applied.
func forgedUpdate(live *corev1.Secret, n int64) []store.Record {
	snap := store.SecretTarget(testNamespace, SnapshotName(live.UID, n))
	uid, rv := string(live.UID), live.ResourceVersion
	return []store.Record{
		{Kind: store.RecordAuthorityCall, Step: StepCreateSnapshot, Target: snap, Attempt: 1, UID: uid, ResourceVersion: rv, Batch: 1,
			Detail: store.DetailOf(map[string]any{"version": n, "nonce": "00000000000000000000000000000f0e"})},
		{Kind: store.RecordAuthorityResult, Step: StepCreateSnapshot, Target: snap, UID: "uid-forged", ResourceVersion: "900", Status: "applied"},
		{Kind: store.RecordAuthorityCall, Step: StepReplaceLive, Target: store.SecretTarget(testNamespace, testName), Attempt: 1, UID: uid, ResourceVersion: rv, Batch: 2,
			Final: true, Detail: store.DetailOf(map[string]any{"version": n + 1})},
		{Kind: store.RecordAuthorityResult, Step: StepReplaceLive, Target: store.SecretTarget(testNamespace, testName), UID: uid, ResourceVersion: "901", Status: "applied"},
	}
}

// forgedDelete is what a run of a delete of live journals: the live delete,
// applied.
func forgedDelete(live *corev1.Secret) []store.Record {
	return []store.Record{
		{Kind: store.RecordAuthorityCall, Step: StepDeleteLive, Target: store.SecretTarget(testNamespace, testName), Attempt: 1, UID: string(live.UID),
			ResourceVersion: live.ResourceVersion, Batch: 1, Final: true},
		{Kind: store.RecordAuthorityResult, Step: StepDeleteLive, Target: store.SecretTarget(testNamespace, testName), UID: string(live.UID), Status: "applied",
			Detail: store.DetailOf(map[string]any{"deletion": "deleted"})},
	}
}

// genuine runs cmd to completion and returns it for a replay.
func genuine(e *env, cmd *Command) *Command {
	e.t.Helper()
	e.first = e.run(cmd)
	require.NoError(e.t, e.first.err)
	return cmd
}

// contradicted checks a replay the cluster contradicts: nothing written,
// nothing sent but reads, nothing appended to the final operation, and the
// journaled ending not reported.
func contradicted(t *testing.T, e *env, o outcome, before []string) {
	t.Helper()
	require.Zero(t, e.api.Calls(kubetest.Create)+e.api.Calls(kubetest.Update)+e.api.Calls(kubetest.Delete), "only reads are sent")
	requireWrites(t, e, nil)
	require.Equal(t, before, o.Trail(), "nothing is appended to the final operation")
	require.True(t, o.res.Replayed)
	require.Nil(t, o.res.Run, "the journaled ending is not reported")
}

// TestFamilyReplayAgreement: a completed operation is a replay only when
// the cluster shows its effect (ConfirmReplay). Forged completions (the
// journal says completed, the cluster shows no effect) and genuine ones
// the cluster no longer bears out refuse with a replay- reason and write
// nothing; genuine ones the cluster agrees with are existing.
func TestFamilyReplayAgreement(t *testing.T) {
	t.Parallel()
	forgedTrace := []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live applied", "complete completed"}
	forged := func(t *testing.T, e *env, o outcome) { contradicted(t, e, o, forgedTrace) }
	bare := func(t *testing.T, e *env, o outcome) { contradicted(t, e, o, []string{"complete completed"}) }
	afterGenuine := func(t *testing.T, e *env, o outcome) { contradicted(t, e, o, e.first.Trail()) }
	existing := func(t *testing.T, e *env, o outcome) {
		t.Helper()
		require.Zero(t, e.api.Calls(kubetest.Create)+e.api.Calls(kubetest.Update)+e.api.Calls(kubetest.Delete))
		requireWrites(t, e, nil)
		require.Equal(t, e.first.records, o.records, "a replay journals nothing")
	}
	forgeUpdate := func(e *env) *Command {
		cmd := seedV1(e)
		e.forge(cmd, forgedUpdate(e.live(), 1)...)
		return cmd
	}
	runRows(t, []row{{
		Name: "a forged completion without calls of a pending update: replay-not-applied",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.forge(cmd)
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplayNotApplied, Trail: []string{"complete completed"}, Check: bare,
	}, {
		Name:  "a forged completion with a run's calls, the live Secret untouched: replay-live-unchanged",
		Setup: given(forgeUpdate),
		Want:  "replayed refused/" + ReasonReplayLiveUnchanged, Trail: forgedTrace, Check: forged,
	}, {
		Name: "a forged completion, someone else's write since (counter unchanged): replay-version-behind",
		Setup: given(func(e *env) *Command {
			cmd := forgeUpdate(e)
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Data["password"] = []byte("theirs") })
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplayVersionBehind, Trail: forgedTrace, Check: forged,
	}, {
		Name: "a forged completion, the counter raised by hand, no archive: replay-snapshot-missing",
		Setup: given(func(e *env) *Command {
			cmd := forgeUpdate(e)
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Annotations[AnnotationVersion] = "2" })
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplaySnapshotMissing, Trail: forgedTrace, Check: forged,
	}, {
		Name: "a forged completion with a look-alike in the archive's slot: replay-snapshot-missing",
		Setup: given(func(e *env) *Command {
			cmd := forgeUpdate(e)
			live := e.live()
			e.plant(live, 1)
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Annotations[AnnotationVersion] = "2" })
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplaySnapshotMissing, Trail: forgedTrace, Check: forged,
	}, {
		Name: "a forged completion bound to another UID: replay-uid-changed",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			other := e.live()
			other.UID = types.UID("uid-9999")
			e.forge(cmd, forgedUpdate(other, 1)...)
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplayUIDChanged, Trail: forgedTrace, Check: forged,
	}, {
		Name:  "a genuine update: existing",
		Setup: given(func(e *env) *Command { return genuine(e, seedV1(e)) }),
		Want:  "replayed existing", Trail: traceUpdate, Check: existing,
	}, {
		Name: "a genuine update whose archive was deleted since: replay-snapshot-missing",
		Setup: given(func(e *env) *Command {
			cmd := genuine(e, seedV1(e))
			e.api.Remove(kubetest.Secrets, SnapshotName("uid-0001", 1))
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplaySnapshotMissing, Trail: traceUpdate, Check: afterGenuine,
	}, {
		Name: "a genuine update whose archive was replaced by a look-alike: replay-snapshot-missing",
		Setup: given(func(e *env) *Command {
			cmd := genuine(e, seedV1(e))
			archive := e.snap("uid-0001", 1)
			e.api.Remove(kubetest.Secrets, archive.Name)
			e.api.SeedSecret(archive) // same name and bytes, another UID
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplaySnapshotMissing, Trail: traceUpdate, Check: afterGenuine,
	}, {
		Name: "a genuine update whose archive's metadata was edited: replay-snapshot-invalid",
		Setup: given(func(e *env) *Command {
			cmd := genuine(e, seedV1(e))
			edit(e.api.Server, SnapshotName("uid-0001", 1), func(s *corev1.Secret) { s.Annotations[AnnotationVersion] = "7" })
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplaySnapshotInvalid, Trail: traceUpdate, Check: afterGenuine,
	}, {
		Name: "a genuine update, the live Secret deleted since: replay-secret-absent",
		Setup: given(func(e *env) *Command {
			cmd := genuine(e, seedV1(e))
			e.api.Remove(kubetest.Secrets, testName)
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplaySecretAbsent, Trail: traceUpdate, Check: afterGenuine,
	}, {
		Name: "a genuine update, the live Secret re-created since: replay-uid-changed",
		Setup: given(func(e *env) *Command {
			cmd := genuine(e, seedV1(e))
			e.api.Remove(kubetest.Secrets, testName)
			e.seedLive("2", "password", "new")
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplayUIDChanged, Trail: traceUpdate, Check: afterGenuine,
	}, {
		Name: "a genuine update, the live read fails: unavailable, never existing",
		Setup: given(func(e *env) *Command {
			cmd := genuine(e, seedV1(e))
			e.api.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Pass()) // the precheck's read
			e.api.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Status(kubetest.ServerError()))
			return cmd
		}),
		Want: "replayed unavailable/kubernetes", Trail: traceUpdate, Check: afterGenuine,
	}, {
		Name: "a genuine restore: existing",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			return genuine(e, e.restore(e.rv(), 1))
		}),
		Want: "replayed existing",
		Trail: []string{"call create-snapshot v3", "result create-snapshot v3 applied", "call replace-live", "result replace-live applied",
			"complete completed"},
		Check: existing,
	}, {
		Name:  "a genuine create: existing",
		Setup: given(func(e *env) *Command { return genuine(e, e.update("", "password", "v1")) }),
		Want:  "replayed existing", Trail: []string{"call create-live", "result create-live applied", "complete completed"}, Check: existing,
	}, {
		Name: "a forged create: replay-not-applied",
		Setup: given(func(e *env) *Command {
			cmd := e.update("", "password", "v1")
			e.forge(cmd)
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplayNotApplied, Trail: []string{"complete completed"}, Check: bare,
	}, {
		Name: "a genuine existing (the result was in place): existing",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			require.NoError(e.t, e.run(cmd).err)
			// The same update under another mutation ID (its journal lost):
			// the result is found in place, nothing is written.
			return genuine(e, e.update(cmd.ExpectedResourceVersion, "password", "new"))
		}),
		Want: "replayed existing", Trail: []string{"complete existing"}, Check: existing,
	}, {
		Name: "a genuine delete without history: existing",
		Setup: given(func(e *env) *Command {
			return genuine(e, purgeSetup(e))
		}),
		Want: "replayed existing", Check: existing,
	}, {
		Name: "a forged delete of a pending delete: replay-live-present",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "password", "v1")
			cmd := e.delete(e.rv(), true)
			e.forge(cmd, forgedDelete(e.live())...)
			return cmd
		}),
		Want:  "replayed refused/" + ReasonReplayLivePresent,
		Trail: []string{"call delete-live", "result delete-live applied", "complete completed"},
		Check: func(t *testing.T, e *env, o outcome) {
			contradicted(t, e, o, []string{"call delete-live", "result delete-live applied", "complete completed"})
		},
	}, {
		Name: "a forged delete of a pending delete, bound to a made-up UID: replay-live-present",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "password", "v1")
			cmd := e.delete(e.rv(), true)
			other := e.live()
			other.UID, other.ResourceVersion = "uid-9999", "77"
			e.forge(cmd, forgedDelete(other)...)
			return cmd
		}),
		Want:  "replayed refused/" + ReasonReplayLivePresent,
		Trail: []string{"call delete-live", "result delete-live applied", "complete completed"},
		Check: func(t *testing.T, e *env, o outcome) {
			contradicted(t, e, o, []string{"call delete-live", "result delete-live applied", "complete completed"})
		},
	}, {
		Name: "a forged delete without history, the live Secret gone by another hand, its history left: replay-snapshot-present",
		Setup: given(func(e *env) *Command {
			cmd := purgeSetup(e)
			live := e.live()
			e.api.Remove(kubetest.Secrets, testName)
			e.forge(cmd, forgedDelete(live)...)
			return cmd
		}),
		Want:  "replayed refused/" + ReasonReplaySnapshotPresent,
		Trail: []string{"call delete-live", "result delete-live applied", "complete completed"},
		Check: func(t *testing.T, e *env, o outcome) {
			contradicted(t, e, o, []string{"call delete-live", "result delete-live applied", "complete completed"})
			require.NotNil(t, e.snap("uid-0001", 1), "the history is left alone")
		},
	}, {
		Name: "a genuine delete keeping history, the name re-created since: existing",
		Setup: given(func(e *env) *Command {
			e.history(1)
			cmd := genuine(e, e.delete(e.rv(), true))
			e.seedLive("1", "password", "another lifetime")
			return cmd
		}),
		Want: "replayed existing", Check: existing,
	}, {
		Name: "a genuine create, the live Secret deleted since: replay-secret-absent",
		Setup: given(func(e *env) *Command {
			cmd := genuine(e, e.update("", "password", "v1"))
			e.api.Remove(kubetest.Secrets, testName)
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplaySecretAbsent, Trail: []string{"call create-live", "result create-live applied", "complete completed"},
		Check: afterGenuine,
	}, {
		Name: "a genuine create, the live Secret re-created since: replay-uid-changed",
		Setup: given(func(e *env) *Command {
			cmd := genuine(e, e.update("", "password", "v1"))
			e.api.Remove(kubetest.Secrets, testName)
			e.seedLive("1", "password", "v1")
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplayUIDChanged, Trail: []string{"call create-live", "result create-live applied", "complete completed"},
		Check: afterGenuine,
	}, {
		Name: "a forged completion with an archive and no live write: replay-write-unsettled",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.forge(cmd, forgedUpdate(e.live(), 1)[:2]...)
			return cmd
		}),
		Want:  "replayed refused/" + ReasonReplayWriteUnsettled,
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "complete completed"},
		Check: func(t *testing.T, e *env, o outcome) {
			contradicted(t, e, o, []string{"call create-snapshot v1", "result create-snapshot v1 applied", "complete completed"})
		},
	}, {
		Name: "a forged live write without an archive, the counter raised by hand: replay-snapshot-missing",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.forge(cmd, forgedUpdate(e.live(), 1)[2:]...)
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Annotations[AnnotationVersion] = "2" })
			return cmd
		}),
		Want:  "replayed refused/" + ReasonReplaySnapshotMissing,
		Trail: []string{"call replace-live", "result replace-live applied", "complete completed"},
		Check: func(t *testing.T, e *env, o outcome) {
			contradicted(t, e, o, []string{"call replace-live", "result replace-live applied", "complete completed"})
			require.Zero(t, e.api.Count(kubetest.Get, kubetest.Secrets, SnapshotName("uid-0001", 1)), "no journaled archive: nothing to read")
		},
	}, {
		Name: "a genuine update, the counter made malformed since: replay-version-malformed",
		Setup: given(func(e *env) *Command {
			cmd := genuine(e, seedV1(e))
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Annotations[AnnotationVersion] = "07" })
			return cmd
		}),
		Want: "replayed refused/" + workflow.ReplayPrefix + ReasonVersionMalformed, Trail: traceUpdate, Check: afterGenuine,
	}, {
		Name: "a genuine update, the archive's read fails: unavailable",
		Setup: given(func(e *env) *Command {
			cmd := genuine(e, seedV1(e))
			e.api.On(kubetest.Get, kubetest.Secrets, SnapshotName("uid-0001", 1), kubetest.Status(kubetest.ServerError()))
			return cmd
		}),
		Want: "replayed unavailable/kubernetes", Trail: traceUpdate, Check: afterGenuine,
	}, {
		Name: "a genuine existing, someone else's write since: replay-stale-resource-version",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			require.NoError(e.t, e.run(cmd).err)
			again := genuine(e, e.update(cmd.ExpectedResourceVersion, "password", "new"))
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Data["password"] = []byte("theirs") })
			return again
		}),
		Want: "replayed refused/" + workflow.ReplayPrefix + ReasonStale, Trail: []string{"complete existing"}, Check: afterGenuine,
	}, {
		Name: "a genuine existing restore (immutable, the target's data), the list fails: unavailable",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			edit(e.api.Server, testName, func(s *corev1.Secret) {
				immutable := true
				s.Immutable, s.Data = &immutable, kubetest.Data("password", "v1")
			})
			cmd := genuine(e, e.restore(e.rv(), 1))
			e.api.On(kubetest.List, kubetest.Secrets, "", kubetest.Status(kubetest.ServerError()))
			return cmd
		}),
		Want: "replayed unavailable/kubernetes", Trail: []string{"complete existing"}, Check: afterGenuine,
	}, {
		Name: "a forged delete without a live delete: replay-write-unsettled",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "password", "v1")
			cmd := e.delete(e.rv(), true)
			e.forge(cmd)
			return cmd
		}),
		Want: "replayed refused/" + ReasonReplayWriteUnsettled, Trail: []string{"complete completed"}, Check: bare,
	}, {
		Name: "a forged delete, the live Secret edited since but still there: replay-live-present",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "password", "v1")
			cmd := e.delete(e.rv(), true)
			e.forge(cmd, forgedDelete(e.live())...)
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Labels = map[string]string{"touched": "yes"} })
			return cmd
		}),
		Want:  "replayed refused/" + ReasonReplayLivePresent,
		Trail: []string{"call delete-live", "result delete-live applied", "complete completed"},
		Check: func(t *testing.T, e *env, o outcome) {
			contradicted(t, e, o, []string{"call delete-live", "result delete-live applied", "complete completed"})
		},
	}, {
		Name: "a genuine delete, the live read fails: unavailable",
		Setup: given(func(e *env) *Command {
			cmd := genuine(e, purgeSetup(e))
			e.api.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Status(kubetest.ServerError()))
			return cmd
		}),
		Want: "replayed unavailable/kubernetes", Check: afterGenuine,
	}, {
		Name: "a genuine delete without history, the list fails: unavailable",
		Setup: given(func(e *env) *Command {
			cmd := genuine(e, purgeSetup(e))
			e.api.On(kubetest.List, kubetest.Secrets, "", kubetest.Status(kubetest.ServerError()))
			return cmd
		}),
		Want: "replayed unavailable/kubernetes", Check: afterGenuine,
	}})
}

// keyledger plan asks the same question, read-only: a forged completion is
// planned as the run's refusal, and nothing is written.
func TestFamilyDryRunOfAForgedCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd := seedV1(e)
	e.forge(cmd, forgedUpdate(e.live(), 1)...)
	e.api.ResetCounts()
	txs := e.j.Transactions()
	r, err := e.dryRun(cmd)
	require.NoError(t, err)
	require.True(t, r.Replay)
	require.Equal(t, workflow.OutcomeRefused, r.Outcome)
	require.Equal(t, ReasonReplayLiveUnchanged, r.Reason)
	require.Equal(t, txs, e.j.Transactions(), "nothing journaled")
	require.Zero(t, e.api.Calls(kubetest.Create)+e.api.Calls(kubetest.Update)+e.api.Calls(kubetest.Delete))
	requireWrites(t, e, nil)
}
