package versioned

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/kubetest"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// lostAfterArchiveChange scripts the live write (update) to be lost before
// it reaches the server, after change ran on the archive of version n:
// the resolution finds the live Secret unchanged, and must check the
// archive again before sending the write again.
func lostAfterArchiveChange(setup func(e *env) *Command, n int64, change func(d *kubetest.Server, name string)) func(e *env) *Command {
	return func(e *env) *Command {
		cmd := setup(e)
		e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.LostBefore().First(func(d *kubetest.Server) { change(d, snapName(n)) }))
		return cmd
	}
}

// TestFamilyRecheckBeforeResend: a live write (update or restore) whose
// answer was lost, found not applied, is sent again only when the archive
// the decision checked is still there, keyledger's and final.
func TestFamilyRecheckBeforeResend(t *testing.T) {
	t.Parallel()
	removed := func(d *kubetest.Server, name string) { d.Remove(kubetest.Secrets, name) }
	deleting := func(d *kubetest.Server, name string) { edit(d, name, kubetest.BeingDeleted) }
	finalized := func(d *kubetest.Server, name string) { edit(d, name, kubetest.Held) }
	archived := []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live unknown/lost"}
	trace := func(reason string) []string {
		return append(append([]string{}, archived...), "resolve replace-live theirs/"+reason, "refuse "+reason)
	}
	notResent := func(t *testing.T, e *env, o outcome) {
		t.Helper()
		requireLive(t, e, "1", "password", "old")
		require.Equal(t, 1, e.api.Calls(kubetest.Update), "the live write is not sent again")
		require.NotEqual(t, "converged", o.Ending())
	}
	restoreArchive := func(e *env) *Command {
		restoreSetup(e)
		return e.restore(e.rv(), 1)
	}
	runRows(t, []row{{
		Name:  "update: the archive deleted since: archive-missing",
		Setup: given(lostAfterArchiveChange(seedV1, 1, removed)),
		Want:  "refused/archive-missing", Trail: trace(ReasonArchiveMissing),
		Check: notResent,
	}, {
		Name:  "update: the archive being deleted since: snapshot-terminating",
		Setup: given(lostAfterArchiveChange(seedV1, 1, deleting)),
		Want:  "refused/snapshot-terminating", Trail: trace(ReasonSnapshotTerminating),
		Check: notResent,
	}, {
		Name:  "update: the archive given a finalizer since: snapshot-finalizers",
		Setup: given(lostAfterArchiveChange(seedV1, 1, finalized)),
		Want:  "refused/snapshot-finalizers", Trail: trace(ReasonSnapshotFinalizers),
		Check: notResent,
	}, {
		Name: "update: the archive replaced by a look-alike since: archive-missing",
		Setup: given(lostAfterArchiveChange(seedV1, 1, func(d *kubetest.Server, name string) {
			d.Remove(kubetest.Secrets, name)
			d.SeedSecret(lookalike(d.Secret(testName), 1))
		})),
		Want: "refused/archive-missing", Trail: trace(ReasonArchiveMissing),
		Check: notResent,
	}, {
		Name: "restore: the archive of the live state deleted since: archive-missing",
		Setup: given(func(e *env) *Command {
			cmd := restoreArchive(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.LostBefore().First(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, snapName(3)) }))
			return cmd
		}),
		Want: "refused/archive-missing",
		Trail: []string{"call create-snapshot v3", "result create-snapshot v3 applied", "call replace-live", "result replace-live unknown/lost",
			"resolve replace-live theirs/archive-missing", "refuse archive-missing"},
		Check: func(t *testing.T, e *env, o outcome) {
			requireLive(t, e, "3", "password", "v3")
			require.Equal(t, 1, e.api.Calls(kubetest.Update), "the restore is not sent again")
		},
	}, {
		Name: "interrupted in calling, the archive deleted before the rerun: archive-missing, never sent",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			// The process dies after the call record, before the send
			// (KEYLEDGER_FAILPOINT=after-call): the answer never journaled.
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.LostBefore())
			e.failMove = func(p store.TransitionParams) bool {
				return p.From == store.StateCalling && len(p.Records) > 0 && p.Records[0].Step == StepReplaceLive
			}
			e.first = e.run(cmd)
			e.failMove = nil
			e.api.Remove(kubetest.Secrets, snapName(1))
			return cmd
		}),
		Want: "refused/archive-missing",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live",
			"result replace-live lost/no-result-recorded", "resolve replace-live theirs/archive-missing", "refuse archive-missing"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, store.StateCalling, e.first.res.Run.Op.State)
			requireLive(t, e, "1", "password", "old")
			require.Zero(t, e.api.Calls(kubetest.Update), "the rerun sends nothing")
		},
	}, {
		Name: "interrupted in calling, rerun with a lower limit while the oldest snapshot is being deleted: prune-pending, not sent",
		Setup: given(func(e *env) *Command {
			cmd := interruptedSecondUpdate(e)
			e.limit = 1
			edit(e.api.Server, snapName(1), kubetest.BeingDeleted)
			return cmd
		}),
		Want: "uncertain/prune-pending",
		Check: func(t *testing.T, e *env, o outcome) {
			require.Zero(t, e.api.Calls(kubetest.Update), "not sent again while a prune is pending")
			require.Equal(t, store.StateResolving, o.res.Run.Op.State, "a rerun checks again")
		},
	}, {
		Name: "interrupted in calling, rerun with a lower limit: sent again (the next write prunes)",
		Setup: given(func(e *env) *Command {
			cmd := interruptedSecondUpdate(e)
			e.limit = 1
			return cmd
		}),
		Want: "completed",
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "3", "password", "v3")
			require.Equal(t, 1, e.api.Calls(kubetest.Update))
		},
	}, {
		Name: "interrupted in calling, the history unreadable on the rerun: uncertain, not sent",
		Setup: given(func(e *env) *Command {
			cmd := interruptedSecondUpdate(e)
			// Every list fails: the prefetch's, then the resolution's.
			e.api.On(kubetest.List, kubetest.Secrets, "", kubetest.Status(kubetest.ServerError()).Always())
			return cmd
		}),
		Want: "uncertain/read-failed",
		Check: func(t *testing.T, e *env, _ outcome) {
			require.Zero(t, e.api.Calls(kubetest.Update))
		},
	}, {
		Name:  "update: the archive still there: sent again",
		Setup: given(lostAfterArchiveChange(seedV1, 1, func(*kubetest.Server, string) {})),
		Want:  "completed",
		Trail: append(append([]string{}, archived...), "resolve replace-live not-applied/resource-version-unchanged",
			"call replace-live", "result replace-live applied", "complete completed"),
		Check: updated,
	}})
}

// interruptedSecondUpdate builds genuine history v1, live at version 2,
// and runs an update of it that dies in calling after its live write's
// call record was journaled and before it was sent.
func interruptedSecondUpdate(e *env) *Command {
	e.t.Helper()
	e.history(1)
	cmd := e.update(e.rv(), "password", "v3")
	e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.LostBefore())
	e.failMove = func(p store.TransitionParams) bool {
		return p.From == store.StateCalling && len(p.Records) > 0 && p.Records[0].Step == StepReplaceLive
	}
	e.first = e.run(cmd)
	e.failMove = nil
	require.Equal(e.t, store.StateCalling, e.first.res.Run.Op.State)
	return cmd
}

// TestFamilyRecheckSlotsBeforeResend: a snapshot create found not applied
// is sent again only when the slots are still free of look-alikes.
func TestFamilyRecheckSlotsBeforeResend(t *testing.T) {
	t.Parallel()
	runRows(t, []row{{
		Name: "a look-alike planted above the counter while the create was lost: slot-occupied",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.LostBefore().First(func(d *kubetest.Server) {
				d.SeedSecret(lookalike(d.Secret(testName), 2))
			}))
			return cmd
		}),
		Want: "refused/slot-occupied",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 theirs/slot-occupied",
			"refuse slot-occupied"},
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "1", "password", "old")
			require.Equal(t, 1, e.api.Calls(kubetest.Create), "not sent again")
		},
	}})
}

// TestFamilyStaleWithPlantedPredecessor: a stale command is existing only
// when the journal proves the predecessor snapshot; a look-alike of it,
// however exact, leaves it stale.
func TestFamilyStaleWithPlantedPredecessor(t *testing.T) {
	t.Parallel()
	runRows(t, []row{{
		Name: "a look-alike predecessor with the right source-resource-version: stale, and no snapshot is read",
		Setup: given(func(e *env) *Command {
			live := e.seedLive("2", "password", "new")
			before := live.DeepCopy()
			before.ResourceVersion, before.Data = "rv-before", kubetest.Data("password", "old")
			e.api.SeedSecret(lookalike(before, 1))
			return e.update("rv-before", "password", "new")
		}),
		Want:  "refused/stale-resource-version",
		Trail: []string{"refuse stale-resource-version"},
		Check: func(t *testing.T, e *env, _ outcome) {
			requireWrites(t, e, nil)
			require.Zero(t, e.api.Count(kubetest.Get, kubetest.Secrets, snapName(1)), "an unproven snapshot is never read")
		},
	}, {
		Name: "keyledger's own predecessor: existing",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			require.Equal(t, "completed", e.run(cmd).Ending())
			return e.update(cmd.ExpectedResourceVersion, "password", "new")
		}),
		Want:  "existing",
		Trail: []string{"complete existing"},
		Check: func(t *testing.T, e *env, _ outcome) { requireWrites(t, e, nil) },
	}})
}

// TestFamilyPurgeThenRefusedSaysWhatIsGone: a delete without history
// purges first; when the live delete is then refused, the refusal names
// the versions already purged.
func TestFamilyPurgeThenRefusedSaysWhatIsGone(t *testing.T) {
	t.Parallel()
	runRows(t, []row{{
		Name: "the live Secret changed after the purge: changed-concurrently, purgedVersions 1 and 2",
		Setup: given(func(e *env) *Command {
			cmd := purgeSetup(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(2), kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) { s.Data["password"] = []byte("theirs") })
			}))
			return cmd
		}),
		Want: "refused/changed-concurrently",
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, []any{1.0, 2.0}, o.ending()["purgedVersions"], "the refusal says the history is gone")
			require.NotNil(t, e.live(), "the live Secret stays")
			require.Nil(t, e.snap("uid-0001", 1))
		},
	}, {
		Name: "the live delete rejected (422) after the purge: purgedVersions in the refusal",
		Setup: given(func(e *env) *Command {
			cmd := purgeSetup(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, testName, kubetest.Status(kubetest.Invalid("Secret", testName)))
			return cmd
		}),
		Want: "refused/invalid",
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, []any{1.0, 2.0}, o.ending()["purgedVersions"])
			require.NotNil(t, e.live())
		},
	}, {
		Name: "the live Secret changed while the live delete was lost: the resolution's refusal names them too",
		Setup: given(func(e *env) *Command {
			cmd := purgeSetup(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, testName, kubetest.LostBefore().First(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) { s.Data["password"] = []byte("theirs") })
			}))
			return cmd
		}),
		Want: "refused/changed-concurrently",
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "resolution", string(o.records[len(o.records)-2].Kind))
			require.Equal(t, []any{1.0, 2.0}, o.ending()["purgedVersions"])
		},
	}})
}

// TestProvenanceReadsOldAndNewNonces: a create-snapshot call record written
// by an older keyledger holds the plain nonce; one written now holds only
// its digest. Both prove the occupant carrying that nonce, and a new call
// record holds no nonce in plain text.
func TestProvenanceReadsOldAndNewNonces(t *testing.T) {
	t.Parallel()
	live := liveSecret()
	oldNonce, newNonce := "00112233445566778899aabbccddeeff", "ffeeddccbbaa99887766554433221100"
	slot := func(n int64) store.Target { return store.SecretTarget(testNamespace, SnapshotName(live.UID, n)) }
	p := newProvenance()
	p.add([]store.Record{
		{Kind: store.RecordAuthorityCall, Step: StepCreateSnapshot, Target: slot(1), UID: string(live.UID), Detail: store.DetailOf(map[string]any{"nonce": oldNonce})},
		{Kind: store.RecordAuthorityCall, Step: StepCreateSnapshot, Target: slot(2), UID: string(live.UID), Detail: store.DetailOf(map[string]any{"nonceDigest": nonceDigest(newNonce)})},
	}, live.UID)
	occupant := func(n int64, nonce string) *corev1.Secret {
		s := snapshotOf(live, n, live.CreationTimestamp.Time, "req/mut")
		s.UID = types.UID("s-" + nonce[:4])
		s.Annotations[AnnotationNonce] = nonce
		return s
	}
	require.True(t, p.carriesNonce(&occupant(1, oldNonce).ObjectMeta), "a plain nonce journaled by an older keyledger is still read")
	require.True(t, p.carriesNonce(&occupant(2, newNonce).ObjectMeta), "a digest proves the nonce")
	require.False(t, p.carriesNonce(&occupant(2, oldNonce).ObjectMeta), "another slot's nonce proves nothing")
	require.False(t, p.carriesNonce(&occupant(1, nonceDigest(oldNonce)).ObjectMeta), "the digest itself is not the nonce")

	f := &family{cmd: (&env{}).command("SecretUpdate")}
	call := f.snapshotCall(live, snapshotOf(live, 3, live.CreationTimestamp.Time, "req/mut"))
	require.NotContains(t, workflowtest.Fields(call.Detail), "nonce", "the journal never holds the nonce")
	require.Regexp(t, "^sha256:[0-9a-f]{64}$", workflowtest.Fields(call.Detail)["nonceDigest"])
}
