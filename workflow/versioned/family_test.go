package versioned

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/kubetest"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// row is one scenario of the family's tables (workflowtest.Row): Setup
// builds the world (and may run earlier commands) and, through given,
// makes the command to run; Want is the run's ending (outcome.Ending),
// Trail the operation's journal in short (outcome.Trail), Check the
// objects afterwards.
type row = workflowtest.Row[*env, outcome]

// given is the Setup that makes the row's command with setup.
func given(setup func(e *env) *Command) func(e *env) {
	return func(e *env) { e.cmd = setup(e) }
}

// lookalike is what someone else would plant in the slot of version n of
// live: keyledger's name, labels and annotations, and a nonce no journal
// holds.
func lookalike(live *corev1.Secret, n int64) *corev1.Secret {
	s := snapshotOf(live, n, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), "someone/else")
	s.Annotations[AnnotationNonce] = "0123456789abcdef0123456789abcdef"
	return s
}

// scripted is setup with one fault scripted: verb on name meets f.
func scripted(setup func(e *env) *Command, verb kubetest.Verb, name string, f kubetest.Fault) func(e *env) *Command {
	return func(e *env) *Command {
		cmd := setup(e)
		e.api.On(verb, kubetest.Secrets, name, f)
		return cmd
	}
}

// Traces that recur.
var (
	traceUpdate = []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live applied", "complete completed"}
)

// requireLive checks the live Secret's version annotation and data.
func requireLive(t *testing.T, e *env, version string, kv ...string) *corev1.Secret {
	t.Helper()
	s := e.live()
	require.NotNil(t, s, "live Secret")
	require.Equal(t, version, s.Annotations[AnnotationVersion], "live version")
	require.Equal(t, kubetest.Data(kv...), s.Data, "live data")
	return s
}

// requireWrites checks how many writes of the family took effect on each
// named object (objects not named: none).
func requireWrites(t *testing.T, e *env, want map[string]int) {
	t.Helper()
	got := e.api.AllWrites(kubetest.Secrets)
	if want == nil {
		want = map[string]int{}
	}
	require.Equal(t, want, got, "writes that took effect")
}

// runRows runs the rows; every row of this family names its ending and
// checks the objects.
func runRows(t *testing.T, rows []row) {
	t.Helper()
	for _, r := range rows {
		require.NotEmpty(t, r.Want, "row %q names its ending", r.Name)
		require.NotNil(t, r.Check, "row %q checks the objects", r.Name)
	}
	workflowtest.RunRows(t, newEnv, rows)
}

// snapName is the snapshot slot of version n of the live UID "uid-0001"
// (the first object every row seeds).
func snapName(n int64) string { return SnapshotName("uid-0001", n) }

func TestFamilyCreateLive(t *testing.T) {
	t.Parallel()
	created := func(t *testing.T, e *env, _ outcome) {
		requireLive(t, e, "1", "a", "1")
		requireWrites(t, e, map[string]int{testName: 1})
	}
	runRows(t, []row{{
		Name:  "applied",
		Setup: given(func(e *env) *Command { return e.update("", "a", "1") }),
		Want:  "completed",
		Trail: []string{"call create-live", "result create-live applied", "complete completed"},
		Check: created,
	}, {
		Name: "lost after apply: the created Secret is ours",
		Setup: given(func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.AppliedLost())
			return e.update("", "a", "1")
		}),
		Want:  "converged",
		Trail: []string{"call create-live", "result create-live unknown/lost", "resolve create-live ours", "complete converged"},
		Check: created,
	}, {
		Name: "lost before apply: absent, sent again",
		Setup: given(func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.LostBefore())
			return e.update("", "a", "1")
		}),
		Want: "completed",
		Trail: []string{"call create-live", "result create-live unknown/lost", "resolve create-live not-applied/absent",
			"call create-live", "result create-live applied", "complete completed"},
		Check: created,
	}, {
		Name: "409 with nothing there is settled by re-reading",
		Setup: given(func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.Status(kubetest.AlreadyExists(kubetest.Secrets, testName)))
			return e.update("", "a", "1")
		}),
		Want: "completed",
		Trail: []string{"call create-live", "result create-live unknown/already-exists", "resolve create-live not-applied/absent",
			"call create-live", "result create-live applied", "complete completed"},
		Check: created,
	}, {
		Name: "someone else creates it first: 409, theirs",
		Setup: given(func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				d.SeedSecret(&corev1.Secret{ObjectMeta: objectMeta(testName), Type: corev1.SecretTypeOpaque, Data: kubetest.Data("a", "theirs")})
			}))
			return e.update("", "a", "1")
		}),
		Want:  "refused/already-exists",
		Trail: []string{"call create-live", "result create-live unknown/already-exists", "resolve create-live theirs/already-exists", "refuse already-exists"},
		Check: func(t *testing.T, e *env, _ outcome) {
			require.Equal(t, kubetest.Data("a", "theirs"), e.live().Data)
			requireWrites(t, e, nil)
		},
	}, {
		Name: "422 is a refusal, nothing written",
		Setup: given(func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.Status(kubetest.Invalid("Secret", testName)))
			return e.update("", "a", "1")
		}),
		Want:  "refused/invalid",
		Trail: []string{"call create-live", "result create-live rejected/invalid", "refuse invalid"},
		Check: func(t *testing.T, e *env, _ outcome) {
			require.Nil(t, e.live())
			requireWrites(t, e, nil)
		},
	}, {
		Name: "resume from resolving: a 500, the re-read fails (uncertain), the rerun settles it",
		Setup: given(func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.Status(kubetest.ServerError()).First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Status(kubetest.ServerError())) // the resolution's re-read
			}))
			cmd := e.update("", "a", "1")
			e.first = e.run(cmd)
			return cmd
		}),
		Want: "completed",
		Trail: []string{"call create-live", "result create-live unknown/server-error", "resolve create-live undetermined/read-failed",
			"resolve create-live not-applied/absent", "call create-live", "result create-live applied", "complete completed"},
		Check: func(t *testing.T, e *env, _ outcome) {
			require.Equal(t, "uncertain/read-failed", e.first.Ending())
			require.Equal(t, store.StateResolving, e.first.res.Run.Op.State)
			created(t, e, outcome{})
		},
	}, {
		Name: "already created with the same data: existing, no call",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "a", "1")
			return e.update("", "a", "1")
		}),
		Want:  "existing",
		Trail: []string{"complete existing"},
		Check: func(t *testing.T, e *env, o outcome) {
			requireWrites(t, e, nil)
			require.Equal(t, 1, o.observations())
		},
	}, {
		Name: "another Secret of that name: already-exists, no call",
		Setup: given(func(e *env) *Command {
			e.seedLive("", "a", "other")
			return e.update("", "a", "1")
		}),
		Want:  "refused/already-exists",
		Trail: []string{"refuse already-exists"},
		Check: func(t *testing.T, e *env, _ outcome) {
			require.Equal(t, 0, e.api.Calls(kubetest.Create))
			requireWrites(t, e, nil)
		},
	}})
}

func objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: testNamespace}
}

// hasSnapshots reports which of the given versions of uid's history exist.
func snapshotsOf(e *env, uid types.UID) []string {
	var out []string
	for _, n := range e.api.Names(kubetest.Secrets) {
		if strings.HasPrefix(n, slotPrefix(uid)) {
			out = append(out, "v"+n[len(slotPrefix(uid)):])
		}
	}
	return out
}

// seedV1 seeds the live Secret at version 1 and returns an update of it.
func seedV1(e *env) *Command {
	e.seedLive("1", "password", "old")
	return e.update(e.rv(), "password", "new")
}

// updated checks the result of seedV1's update: the archive of version 1
// (the old data) and live version 2, each written once.
func updated(t *testing.T, e *env, _ outcome) {
	t.Helper()
	requireLive(t, e, "2", "password", "new")
	s := e.snap("uid-0001", 1)
	require.NotNil(t, s, "snapshot v1")
	require.Equal(t, kubetest.Data("password", "old"), s.Data)
	require.True(t, *s.Immutable)
	requireWrites(t, e, map[string]int{testName: 1, snapName(1): 1})
}

func TestFamilyCreateSnapshot(t *testing.T) {
	t.Parallel()
	runRows(t, []row{{
		Name:  "applied",
		Setup: given(seedV1),
		Want:  "completed",
		Trail: traceUpdate,
		Check: func(t *testing.T, e *env, o outcome) {
			updated(t, e, o)
			require.Equal(t, 1, o.observations(), "the live read is journaled once: the second decision saw the same resourceVersion")
			require.Equal(t, int64(2), int64(o.ending()["version"].(float64)))
		},
	}, {
		Name:  "lost after apply: the occupant carries the journaled nonce",
		Setup: given(scripted(seedV1, kubetest.Create, snapName(1), kubetest.AppliedLost())),
		Want:  "completed",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 ours",
			"call replace-live", "result replace-live applied", "complete completed"},
		Check: updated,
	}, {
		Name:  "lost before apply: absent, sent again",
		Setup: given(scripted(seedV1, kubetest.Create, snapName(1), kubetest.LostBefore())),
		Want:  "completed",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 not-applied/absent",
			"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live applied", "complete completed"},
		Check: updated,
	}, {
		Name:  "409 with nothing there: absent, sent again",
		Setup: given(scripted(seedV1, kubetest.Create, snapName(1), kubetest.Status(kubetest.AlreadyExists(kubetest.Secrets, snapName(1))))),
		Want:  "completed",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/already-exists", "resolve create-snapshot v1 not-applied/absent",
			"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live applied", "complete completed"},
		Check: updated,
	}, {
		Name: "409 from a look-alike planted just before: slot-occupied, left alone",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			live := e.live()
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				d.SeedSecret(lookalike(live, 1))
			}))
			return cmd
		}),
		Want: "refused/slot-occupied",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/already-exists", "resolve create-snapshot v1 theirs/slot-occupied",
			"refuse slot-occupied"},
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "1", "password", "old")
			require.Equal(t, "someone/else", e.snap("uid-0001", 1).Annotations[AnnotationActor], "the look-alike stays")
			requireWrites(t, e, nil)
		},
	}, {
		Name: "a look-alike planted before the run in the slot: slot-occupied, nothing sent",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.plant(e.live(), 1)
			return cmd
		}),
		Want:  "refused/slot-occupied",
		Trail: []string{"refuse slot-occupied"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, []any{snapName(1)}, o.ending()["occupied"])
			require.Equal(t, 0, e.api.Calls(kubetest.Create)+e.api.Calls(kubetest.Update)+e.api.Calls(kubetest.Delete))
			requireWrites(t, e, nil)
		},
	}, {
		Name: "a look-alike above the counter: slot-occupied names the highest slot",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.plant(e.live(), 5)
			return cmd
		}),
		Want:  "refused/slot-occupied",
		Trail: []string{"refuse slot-occupied"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.InDelta(t, 5, o.ending()["highestOccupied"], 0)
			require.NotNil(t, e.snap("uid-0001", 5), "never deleted")
			requireWrites(t, e, nil)
		},
	}, {
		Name:  "422 is a refusal, nothing written",
		Setup: given(scripted(seedV1, kubetest.Create, snapName(1), kubetest.Status(kubetest.Invalid("Secret", snapName(1))))),
		Want:  "refused/invalid",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 rejected/invalid", "refuse invalid"},
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "1", "password", "old")
			require.Nil(t, e.snap("uid-0001", 1))
			requireWrites(t, e, nil)
		},
	}, {
		// The live write's decision does not read the live Secret again:
		// the replace carries the resourceVersion this run read, so the
		// API server refuses it (409, nothing written) and the resolution
		// reads the changed Secret and refuses with the reason a fresh
		// read would have given.
		Name: "someone else's write to the live Secret before the archive: the replace's precondition fails, changed-concurrently",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) { s.Data["password"] = []byte("theirs") })
			}))
			return cmd
		}),
		Want: "refused/changed-concurrently",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live unknown/conflict",
			"resolve replace-live theirs/changed-concurrently", "refuse changed-concurrently"},
		Check: func(t *testing.T, e *env, o outcome) {
			requireLive(t, e, "1", "password", "theirs")
			require.Equal(t, 1, e.api.Calls(kubetest.Update), "one live write sent, refused by its precondition")
			require.Equal(t, e.rv(), o.last(store.RecordResolution, StepReplaceLive).ResourceVersion, "the resolution names the changed Secret")
			requireWrites(t, e, map[string]int{snapName(1): 1})
		},
	}, {
		Name: "an unsettled snapshot of another operation (its nonce journaled) is reused",
		Setup: given(func(e *env) *Command {
			first := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Status(kubetest.ServerError()))
			}))
			e.first = e.run(first) // its create landed, its answer and re-read were lost
			second := e.update(first.ExpectedResourceVersion, "password", "new")
			return second
		}),
		Want: "completed",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/already-exists", "resolve create-snapshot v1 ours",
			"call replace-live", "result replace-live applied", "complete completed"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "uncertain/read-failed", e.first.Ending())
			requireLive(t, e, "2", "password", "new")
			require.Equal(t, true, workflowtest.Fields(o.last(store.RecordResolution, StepCreateSnapshot).Detail)["reused"], "the resolution says the snapshot was another operation's")
			requireWrites(t, e, map[string]int{testName: 1})
		},
	}, {
		Name: "resume from calling: the answer was never journaled, the snapshot is there",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.failMove = func(p store.TransitionParams) bool { return p.From == store.StateCalling }
			e.first = e.run(cmd)
			e.failMove = nil
			return cmd
		}),
		Want: "completed",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 lost/no-result-recorded",
			"resolve create-snapshot v1 ours", "call replace-live", "result replace-live applied", "complete completed"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "uncertain/interrupted", e.first.Ending())
			require.Equal(t, store.StateCalling, e.first.res.Run.Op.State)
			requireLive(t, e, "2", "password", "new")
			requireWrites(t, e, map[string]int{testName: 1})
		},
	}, {
		Name: "resume from calling: the create never left, it is sent again",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.LostBefore())
			e.failMove = func(p store.TransitionParams) bool { return p.From == store.StateCalling }
			e.first = e.run(cmd)
			e.failMove = nil
			return cmd
		}),
		Want: "completed",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 lost/no-result-recorded", "resolve create-snapshot v1 not-applied/absent",
			"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live applied", "complete completed"},
		Check: updated,
	}})
}

// twoVersions builds genuine history v1 and v2 (live at version 3), sets
// the retention limit to 2 and returns an update: it archives v3 and prunes
// v1.
func twoVersions(e *env) *Command {
	e.history(2)
	e.limit = 2
	return e.update(e.rv(), "password", "v4")
}

// pruned checks twoVersions' update: v1 pruned, v2 and v3 kept, live at 4.
func pruned(t *testing.T, e *env, _ outcome) {
	t.Helper()
	requireLive(t, e, "4", "password", "v4")
	require.Equal(t, []string{"v2", "v3"}, snapshotsOf(e, "uid-0001"))
	require.Equal(t, 1, e.api.Writes(kubetest.Secrets, snapName(1)), "v1 deleted once")
	require.Equal(t, 1, e.api.Writes(kubetest.Secrets, testName))
}

// prunedByMetadata is pruned, the lost answer settled from the snapshot's
// metadata alone: no snapshot was read whole (values included).
func prunedByMetadata(t *testing.T, e *env, o outcome) {
	t.Helper()
	pruned(t, e, o)
	require.Zero(t, e.api.snapshotReads.Load(), "a cleanup reads no snapshot value")
}

func TestFamilyPruneSnapshot(t *testing.T) {
	t.Parallel()
	prunePrefix := []string{"call create-snapshot v3", "result create-snapshot v3 applied", "call prune-snapshot v1"}
	replaced := []string{"call replace-live", "result replace-live applied", "complete completed"}
	trace := func(middle ...string) []string {
		return append(append(append([]string{}, prunePrefix...), middle...), replaced...)
	}
	runRows(t, []row{{
		Name:  "applied",
		Setup: given(twoVersions),
		Want:  "completed",
		Trail: trace("result prune-snapshot v1 applied"),
		Check: pruned,
	}, {
		Name:  "lost after apply: the snapshot is gone, ours",
		Setup: given(scripted(twoVersions, kubetest.Delete, snapName(1), kubetest.AppliedLost())),
		Want:  "completed",
		Trail: trace("result prune-snapshot v1 unknown/lost", "resolve prune-snapshot v1 ours"),
		Check: prunedByMetadata,
	}, {
		Name:  "lost before apply: still there, sent again",
		Setup: given(scripted(twoVersions, kubetest.Delete, snapName(1), kubetest.LostBefore())),
		Want:  "completed",
		Trail: trace("result prune-snapshot v1 unknown/lost", "resolve prune-snapshot v1 not-applied/present",
			"call prune-snapshot v1", "result prune-snapshot v1 applied"),
		Check: prunedByMetadata,
	}, {
		Name:  "404: someone deleted it first, absent is applied",
		Setup: given(scripted(twoVersions, kubetest.Delete, snapName(1), kubetest.Theirs(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, snapName(1)) }))),
		Want:  "completed",
		Trail: trace("result prune-snapshot v1 applied"),
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "4", "password", "v4")
			require.Equal(t, []string{"v2", "v3"}, snapshotsOf(e, "uid-0001"))
			require.Zero(t, e.api.Writes(kubetest.Secrets, snapName(1)), "deleted by someone else, not by us")
		},
	}, {
		// Someone else's finalizer added between the listing and the
		// delete fails the delete's resourceVersion precondition (409): a
		// snapshot precondition conflict is a refusal, never a delete sent
		// again with new preconditions; the live write is never sent.
		Name: "409 from someone else's finalizer: refused snapshot-changed, the live write never sent",
		Setup: given(func(e *env) *Command {
			cmd := twoVersions(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) { edit(d, snapName(1), kubetest.Held) }))
			return cmd
		}),
		Want: "refused/snapshot-changed",
		Trail: []string{"call create-snapshot v3", "result create-snapshot v3 applied",
			"call prune-snapshot v1", "result prune-snapshot v1 unknown/conflict", "resolve prune-snapshot v1 theirs/snapshot-changed",
			"refuse snapshot-changed"},
		Check: func(t *testing.T, e *env, o outcome) {
			requireLive(t, e, "3", "password", "v3")
			require.Equal(t, []string{"v1", "v2", "v3"}, snapshotsOf(e, "uid-0001"))
			require.Equal(t, snapName(1), o.ending()["snapshot"], "the refusal names the snapshot")
			requireWrites(t, e, map[string]int{snapName(3): 1})
		},
	}, {
		Name: "422 (admission) leaves it in place: failed, counted, the live write held; a rerun sends it again",
		Setup: given(func(e *env) *Command {
			cmd := twoVersions(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.Status(kubetest.Invalid("Secret", snapName(1))))
			return cmd
		}),
		Want: "uncertain/prune-pending",
		Trail: []string{"call create-snapshot v3", "result create-snapshot v3 applied",
			"call prune-snapshot v1", "result prune-snapshot v1 applied/invalid"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.ErrorContains(t, o.err, "absent 0, pending 0, failed 1")
			requireLive(t, e, "3", "password", "v3")
			require.Equal(t, []string{"v1", "v2", "v3"}, snapshotsOf(e, "uid-0001"))
			requireWrites(t, e, map[string]int{snapName(3): 1})
			require.Equal(t, "failed", workflowtest.Fields(o.last(store.RecordAuthorityResult, StepPruneSnapshot).Detail)["deletion"])

			// The policy lifted: the same command sends the delete again and completes.
			again := e.run(e.cmd)
			require.NoError(t, again.err)
			requireLive(t, e, "4", "password", "v4")
			require.Equal(t, []string{"v2", "v3"}, snapshotsOf(e, "uid-0001"))
		},
	}, {
		Name: "the pruned slot re-occupied by another object: absent, the newcomer left alone",
		Setup: given(func(e *env) *Command {
			cmd := twoVersions(e)
			live := e.live()
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
					d.SeedSecret(lookalike(live, 1))
				}))
			}))
			return cmd
		}),
		Want:  "completed",
		Trail: trace("result prune-snapshot v1 unknown/lost", "resolve prune-snapshot v1 ours/slot-reoccupied"),
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "4", "password", "v4")
			require.Equal(t, "someone/else", e.snap("uid-0001", 1).Annotations[AnnotationActor])
		},
	}, {
		Name: "a look-alike below the counter is never pruned: the oldest genuine snapshot goes",
		Setup: given(func(e *env) *Command {
			e.history(3) // v1, v2, v3; live at 4
			e.limit = 2
			live := e.live()
			e.api.Remove(kubetest.Secrets, snapName(1))
			e.plant(live, 1)
			return e.update(live.ResourceVersion, "password", "v5")
		}),
		Want: "completed",
		Trail: []string{"call create-snapshot v4", "result create-snapshot v4 applied", "call prune-snapshot v2", "result prune-snapshot v2 applied",
			"call replace-live", "result replace-live applied", "complete completed"},
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "5", "password", "v5")
			require.Equal(t, []string{"v1", "v3", "v4"}, snapshotsOf(e, "uid-0001"))
			require.Equal(t, "someone/else", e.snap("uid-0001", 1).Annotations[AnnotationActor], "the look-alike stays")
		},
	}, {
		Name: "a snapshot already terminating beyond the limit: prune-pending, nothing sent for it",
		Setup: given(func(e *env) *Command {
			cmd := twoVersions(e)
			edit(e.api.Server, snapName(1), kubetest.BeingDeleted)
			return cmd
		}),
		Want:  "uncertain/prune-pending",
		Trail: []string{"call create-snapshot v3", "result create-snapshot v3 applied"},
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "3", "password", "v3")
			require.Zero(t, e.api.Calls(kubetest.Delete))
		},
	}})
}

// purgeSetup builds genuine history v1 and v2 (live at version 3) and a
// look-alike claiming the UID by label only, and returns a delete without
// history.
func purgeSetup(e *env) *Command {
	e.history(2)
	foreign := &corev1.Secret{ObjectMeta: objectMeta("not-history"), Type: corev1.SecretTypeOpaque}
	foreign.Labels = map[string]string{LabelSourceUID: Hash("uid-0001"), LabelKind: KindHistory}
	e.api.SeedSecret(foreign)
	return e.delete(e.rv(), false)
}

// purged checks purgeSetup's delete: both snapshots and the live Secret
// gone, the look-alike left alone.
func purged(t *testing.T, e *env, o outcome) {
	t.Helper()
	require.Equal(t, []string{"not-history"}, e.api.Names(kubetest.Secrets))
	require.Equal(t, "deleted", o.ending()["history"])
}

// purgedByMetadata is purged, the lost answer settled from the snapshot's
// metadata alone: no snapshot was read whole (values included).
func purgedByMetadata(t *testing.T, e *env, o outcome) {
	t.Helper()
	purged(t, e, o)
	require.Zero(t, e.api.snapshotReads.Load(), "a cleanup reads no snapshot value")
}

func TestFamilyDeleteSnapshot(t *testing.T) {
	t.Parallel()
	purge := func(middle ...string) []string {
		out := append([]string{"call delete-snapshot v1"}, middle...)
		return append(out, "call delete-snapshot v2", "result delete-snapshot v2 applied", "call delete-live", "result delete-live applied", "complete deleted")
	}
	runRows(t, []row{{
		Name:  "applied: every genuine snapshot, then the live Secret; a foreign one left alone",
		Setup: given(purgeSetup),
		Want:  "deleted",
		Trail: purge("result delete-snapshot v1 applied"),
		Check: func(t *testing.T, e *env, o outcome) {
			purged(t, e, o)
			requireWrites(t, e, map[string]int{snapName(1): 1, snapName(2): 1, testName: 1})
		},
	}, {
		Name:  "lost after apply: gone, ours",
		Setup: given(scripted(purgeSetup, kubetest.Delete, snapName(1), kubetest.AppliedLost())),
		Want:  "deleted",
		Trail: purge("result delete-snapshot v1 unknown/lost", "resolve delete-snapshot v1 ours"),
		Check: purgedByMetadata,
	}, {
		Name:  "lost before apply: still there, sent again",
		Setup: given(scripted(purgeSetup, kubetest.Delete, snapName(1), kubetest.LostBefore())),
		Want:  "deleted",
		Trail: purge("result delete-snapshot v1 unknown/lost", "resolve delete-snapshot v1 not-applied/present",
			"call delete-snapshot v1", "result delete-snapshot v1 applied"),
		Check: purgedByMetadata,
	}, {
		Name:  "404: someone deleted it first",
		Setup: given(scripted(purgeSetup, kubetest.Delete, snapName(1), kubetest.Theirs(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, snapName(1)) }))),
		Want:  "deleted",
		Trail: purge("result delete-snapshot v1 applied"),
		Check: purged,
	}, {
		Name: "409 from someone else's finalizer: refused snapshot-changed, the live Secret stays",
		Setup: given(func(e *env) *Command {
			cmd := purgeSetup(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, snapName(1), kubetest.Held)
			}))
			return cmd
		}),
		Want: "refused/snapshot-changed",
		Trail: []string{"call delete-snapshot v1", "result delete-snapshot v1 unknown/conflict", "resolve delete-snapshot v1 theirs/snapshot-changed",
			"refuse snapshot-changed"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.NotNil(t, e.live(), "the live delete is never sent")
			require.Equal(t, []string{"v1", "v2"}, snapshotsOf(e, "uid-0001"))
			require.Equal(t, []any{}, o.ending()["purgedVersions"])
			requireWrites(t, e, nil)
		},
	}, {
		Name: "three snapshots, one held by a finalizer, one refused by admission: absent 1, pending 1, failed 1, the live Secret stays",
		Setup: given(func(e *env) *Command {
			e.history(3) // v1, v2, v3; live at 4
			edit(e.api.Server, snapName(1), kubetest.Held)
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(2), kubetest.Status(kubetest.Invalid("Secret", snapName(2))))
			return e.delete(e.rv(), false)
		}),
		Want: "uncertain/history-pending",
		Trail: []string{"call delete-snapshot v1", "result delete-snapshot v1 applied", "call delete-snapshot v2", "result delete-snapshot v2 applied/invalid",
			"call delete-snapshot v3", "result delete-snapshot v3 applied"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.ErrorContains(t, o.err, "absent 1, pending 1, failed 1")
			require.NotNil(t, e.live(), "the live delete waits")
			require.NotNil(t, e.snap("uid-0001", 1).DeletionTimestamp)
			require.NotNil(t, e.snap("uid-0001", 2))
			require.Nil(t, e.snap("uid-0001", 3))
			requireWrites(t, e, map[string]int{snapName(1): 1, snapName(3): 1})
		},
	}, {
		Name: "someone else's edit of the snapshot's metadata: theirs, refused",
		Setup: given(func(e *env) *Command {
			cmd := purgeSetup(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, snapName(1), func(s *corev1.Secret) { s.Labels["extra"] = "x" })
			}))
			return cmd
		}),
		Want: "refused/snapshot-invalid",
		Trail: []string{"call delete-snapshot v1", "result delete-snapshot v1 unknown/conflict", "resolve delete-snapshot v1 theirs/snapshot-invalid",
			"refuse snapshot-invalid"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.NotNil(t, e.live())
			require.NotNil(t, e.snap("uid-0001", 1))
			require.Equal(t, map[string]any{"name": testName, "namespace": testNamespace, "uid": "uid-0001"}, o.ending()["secret"])
		},
	}, {
		Name: "the live Secret changed after the first snapshot delete: no further snapshot goes, refused naming the change",
		Setup: given(func(e *env) *Command {
			cmd := purgeSetup(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.Pass().First(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) { s.Data["other"] = []byte("x") })
			}))
			return cmd
		}),
		Want:  "refused/changed-concurrently",
		Trail: []string{"call delete-snapshot v1", "result delete-snapshot v1 applied", "refuse changed-concurrently"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.NotNil(t, e.live(), "the live Secret stays")
			require.Nil(t, e.snap("uid-0001", 1))
			require.NotNil(t, e.snap("uid-0001", 2), "not deleted after the change")
			requireWrites(t, e, map[string]int{snapName(1): 1})
			require.Equal(t, []any{float64(1)}, o.ending()["purgedVersions"])
			require.Equal(t, 2, o.observations(), "the read that saw the change is journaled")
		},
	}, {
		Name: "the live Secret deleted after the first snapshot delete: secret-absent, no further snapshot goes",
		Setup: given(func(e *env) *Command {
			cmd := purgeSetup(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.Pass().First(func(d *kubetest.Server) {
				d.Remove(kubetest.Secrets, testName)
			}))
			return cmd
		}),
		Want:  "refused/secret-absent",
		Trail: []string{"call delete-snapshot v1", "result delete-snapshot v1 applied", "refuse secret-absent"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.NotNil(t, e.snap("uid-0001", 2), "not deleted after the change")
			requireWrites(t, e, map[string]int{snapName(1): 1})
		},
	}, {
		Name: "a lost delete not applied, the live Secret changed since: not sent again, refused naming the change",
		Setup: given(func(e *env) *Command {
			cmd := purgeSetup(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.LostBefore().First(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) { s.Data["other"] = []byte("x") })
			}))
			return cmd
		}),
		Want:  "refused/changed-concurrently",
		Trail: []string{"call delete-snapshot v1", "result delete-snapshot v1 unknown/lost", "resolve delete-snapshot v1 theirs/changed-concurrently", "refuse changed-concurrently"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, []string{"v1", "v2"}, snapshotsOf(e, "uid-0001"), "no snapshot deleted")
			require.NotNil(t, e.live())
			require.Equal(t, []any{}, o.ending()["purgedVersions"])
		},
	}, {
		Name: "a snapshot already being deleted: history-pending at once, the read journaled",
		Setup: given(func(e *env) *Command {
			cmd := purgeSetup(e)
			edit(e.api.Server, snapName(2), kubetest.BeingDeleted)
			return cmd
		}),
		Want:  "uncertain/history-pending",
		Trail: []string{"call delete-snapshot v1", "result delete-snapshot v1 applied"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, 1, o.observations())
			require.Equal(t, store.StateAnswered, o.res.Run.Op.State)
			require.NotNil(t, e.live())
			requireWrites(t, e, map[string]int{snapName(1): 1})
		},
	}, {
		Name: "only a snapshot already being deleted: history-pending before any call, the read journaled",
		Setup: given(func(e *env) *Command {
			e.history(1)
			edit(e.api.Server, snapName(1), kubetest.BeingDeleted)
			return e.delete(e.rv(), false)
		}),
		Want:  "uncertain/history-pending",
		Trail: []string{},
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, 1, o.observations(), "what the decision saw is journaled before the run ends")
			require.Equal(t, store.StatePrepared, o.res.Run.Op.State)
			requireWrites(t, e, nil)
		},
	}, {
		Name: "keepHistory: no snapshot is touched",
		Setup: given(func(e *env) *Command {
			purgeSetup(e)
			return e.delete(e.rv(), true)
		}),
		Want:  "deleted",
		Trail: []string{"call delete-live", "result delete-live applied", "complete deleted"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "kept", o.ending()["history"])
			require.Equal(t, []string{"v1", "v2"}, snapshotsOf(e, "uid-0001"))
			require.Zero(t, e.api.Calls(kubetest.List), "history is not even listed")
			requireWrites(t, e, map[string]int{testName: 1})
		},
	}})
}

func TestFamilyDeleteLive(t *testing.T) {
	t.Parallel()
	seed := func(e *env) *Command {
		e.seedLive("1", "a", "1")
		return e.delete(e.rv(), true)
	}
	gone := func(t *testing.T, e *env, _ outcome) {
		require.Nil(t, e.live())
		requireWrites(t, e, map[string]int{testName: 1})
	}
	runRows(t, []row{{
		Name:  "applied",
		Setup: given(seed),
		Want:  "deleted",
		Trail: []string{"call delete-live", "result delete-live applied", "complete deleted"},
		Check: gone,
	}, {
		Name: "finalizers hold it: pending",
		Setup: given(func(e *env) *Command {
			e.api.SeedSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: testName, Finalizers: []string{"example.com/hold"}}, Data: kubetest.Data("a", "1")})
			return e.delete(e.rv(), true)
		}),
		Want:  "pending",
		Trail: []string{"call delete-live", "result delete-live applied", "complete pending"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.NotNil(t, e.live().DeletionTimestamp)
			require.InDelta(t, 1, o.ending()["finalizers"], 0)
		},
	}, {
		Name:  "lost after apply: gone, ours",
		Setup: given(scripted(seed, kubetest.Delete, testName, kubetest.AppliedLost())),
		Want:  "deleted",
		Trail: []string{"call delete-live", "result delete-live unknown/lost", "resolve delete-live ours", "complete deleted"},
		Check: gone,
	}, {
		Name:  "lost before apply: unchanged, sent again",
		Setup: given(scripted(seed, kubetest.Delete, testName, kubetest.LostBefore())),
		Want:  "deleted",
		Trail: []string{"call delete-live", "result delete-live unknown/lost", "resolve delete-live not-applied/resource-version-unchanged",
			"call delete-live", "result delete-live applied", "complete deleted"},
		Check: gone,
	}, {
		Name: "409 from someone else's write: theirs",
		Setup: given(func(e *env) *Command {
			cmd := seed(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) { s.Data["a"] = []byte("theirs") })
			}))
			return cmd
		}),
		Want:  "refused/changed-concurrently",
		Trail: []string{"call delete-live", "result delete-live unknown/conflict", "resolve delete-live theirs/changed-concurrently", "refuse changed-concurrently"},
		Check: func(t *testing.T, e *env, _ outcome) {
			require.Equal(t, kubetest.Data("a", "theirs"), e.live().Data)
			requireWrites(t, e, nil)
		},
	}, {
		Name:  "404: someone deleted it first",
		Setup: given(scripted(seed, kubetest.Delete, testName, kubetest.Theirs(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, testName) }))),
		Want:  "deleted",
		Trail: []string{"call delete-live", "result delete-live applied", "complete deleted"},
		Check: func(t *testing.T, e *env, _ outcome) {
			require.Nil(t, e.live())
			requireWrites(t, e, nil)
		},
	}, {
		Name:  "422 is a refusal",
		Setup: given(scripted(seed, kubetest.Delete, testName, kubetest.Status(kubetest.Invalid("Secret", testName)))),
		Want:  "refused/invalid",
		Trail: []string{"call delete-live", "result delete-live rejected/invalid", "refuse invalid"},
		Check: func(t *testing.T, e *env, _ outcome) {
			require.NotNil(t, e.live())
			requireWrites(t, e, nil)
		},
	}, {
		Name: "recreated by someone else after our delete: deleted, the newcomer named",
		Setup: given(func(e *env) *Command {
			cmd := seed(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
					d.SeedSecret(&corev1.Secret{ObjectMeta: objectMeta(testName), Data: kubetest.Data("a", "new")})
				}))
			}))
			return cmd
		}),
		Want:  "deleted",
		Trail: []string{"call delete-live", "result delete-live applied", "complete deleted"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "uid-0002", o.ending()["recreatedUID"])
			require.Equal(t, kubetest.Data("a", "new"), e.live().Data)
		},
	}, {
		Name: "resume from answered: the delete applied, the confirming read failed",
		Setup: given(func(e *env) *Command {
			cmd := seed(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Status(kubetest.ServerError()))
			}))
			e.first = e.run(cmd)
			return cmd
		}),
		Want:  "deleted",
		Trail: []string{"call delete-live", "result delete-live applied", "complete deleted"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "uncertain/interrupted", e.first.Ending())
			require.Equal(t, store.StateAnswered, e.first.res.Run.Op.State)
			require.Nil(t, e.live())
			requireWrites(t, e, nil) // the rerun only confirms
			require.Zero(t, e.api.Calls(kubetest.Delete))
		},
	}})
}

func TestFamilyReplaceLive(t *testing.T) {
	t.Parallel()
	archived := []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live"}
	trace := func(rest ...string) []string { return append(append([]string{}, archived...), rest...) }
	runRows(t, []row{{
		Name:  "lost after apply: version 2 with exactly our data is ours",
		Setup: given(scripted(seedV1, kubetest.Update, testName, kubetest.AppliedLost())),
		Want:  "converged",
		Trail: trace("result replace-live unknown/lost", "resolve replace-live ours", "complete converged"),
		Check: func(t *testing.T, e *env, o outcome) {
			updated(t, e, o)
			require.InDelta(t, 2, o.ending()["version"], 0)
		},
	}, {
		Name:  "lost before apply: unchanged, the same compare-and-set sent again",
		Setup: given(scripted(seedV1, kubetest.Update, testName, kubetest.LostBefore())),
		Want:  "completed",
		Trail: trace("result replace-live unknown/lost", "resolve replace-live not-applied/resource-version-unchanged",
			"call replace-live", "result replace-live applied", "complete completed"),
		Check: updated,
	}, {
		Name:  "409 with nothing changed: sent again",
		Setup: given(scripted(seedV1, kubetest.Update, testName, kubetest.Status(kubetest.Conflict(kubetest.Secrets, testName)))),
		Want:  "completed",
		Trail: trace("result replace-live unknown/conflict", "resolve replace-live not-applied/resource-version-unchanged",
			"call replace-live", "result replace-live applied", "complete completed"),
		Check: updated,
	}, {
		Name:  "500 with nothing changed: re-read, sent again",
		Setup: given(scripted(seedV1, kubetest.Update, testName, kubetest.Status(kubetest.ServerError()))),
		Want:  "completed",
		Trail: trace("result replace-live unknown/server-error", "resolve replace-live not-applied/resource-version-unchanged",
			"call replace-live", "result replace-live applied", "complete completed"),
		Check: updated,
	}, {
		Name: "resume from calling: the live write landed, its answer never journaled",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.failMove = func(p store.TransitionParams) bool {
				return p.From == store.StateCalling && len(p.Records) > 0 && p.Records[0].Step == StepReplaceLive
			}
			e.first = e.run(cmd)
			e.failMove = nil
			return cmd
		}),
		Want:  "converged",
		Trail: trace("result replace-live lost/no-result-recorded", "resolve replace-live ours", "complete converged"),
		Check: func(t *testing.T, e *env, _ outcome) {
			require.Equal(t, "uncertain/interrupted", e.first.Ending())
			require.Equal(t, store.StateCalling, e.first.res.Run.Op.State)
			requireLive(t, e, "2", "password", "new")
			requireWrites(t, e, nil) // the rerun writes nothing
		},
	}, {
		Name: "409 from someone else's write: theirs, the archive stays",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) { s.Data["password"] = []byte("theirs") })
			}))
			return cmd
		}),
		Want:  "refused/changed-concurrently",
		Trail: trace("result replace-live unknown/conflict", "resolve replace-live theirs/changed-concurrently", "refuse changed-concurrently"),
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "1", "password", "theirs")
			requireWrites(t, e, map[string]int{snapName(1): 1})
		},
	}, {
		Name: "someone else writes version 2 with other data: theirs",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) {
					s.Annotations[AnnotationVersion] = "2"
					s.Data["password"] = []byte("theirs")
				})
			}))
			return cmd
		}),
		Want:  "refused/changed-concurrently",
		Trail: trace("result replace-live unknown/conflict", "resolve replace-live theirs/changed-concurrently", "refuse changed-concurrently"),
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "2", "password", "theirs")
		},
	}, {
		Name:  "404: someone deleted it",
		Setup: given(scripted(seedV1, kubetest.Update, testName, kubetest.Theirs(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, testName) }))),
		Want:  "refused/secret-absent",
		Trail: trace("result replace-live unknown/not-found", "resolve replace-live theirs/secret-absent", "refuse secret-absent"),
		Check: func(t *testing.T, e *env, _ outcome) {
			require.Nil(t, e.live())
			requireWrites(t, e, map[string]int{snapName(1): 1})
		},
	}, {
		Name: "recreated under the same name: the UID precondition fails, uid-changed",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				d.Remove(kubetest.Secrets, testName)
				d.SeedSecret(&corev1.Secret{ObjectMeta: objectMeta(testName), Data: kubetest.Data("password", "other")})
			}))
			return cmd
		}),
		Want:  "refused/uid-changed",
		Trail: trace("result replace-live unknown/conflict", "resolve replace-live theirs/uid-changed", "refuse uid-changed"),
		Check: func(t *testing.T, e *env, _ outcome) {
			require.Equal(t, kubetest.Data("password", "other"), e.live().Data)
			requireWrites(t, e, map[string]int{snapName(1): 1})
		},
	}, {
		Name:  "422 is a refusal",
		Setup: given(scripted(seedV1, kubetest.Update, testName, kubetest.Status(kubetest.Invalid("Secret", testName)))),
		Want:  "refused/invalid",
		Trail: trace("result replace-live rejected/invalid", "refuse invalid"),
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "1", "password", "old")
		},
	}, {
		Name: "the archive deleted by someone before the live write: archive-missing",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, snapName(1)) }))
			}))
			return cmd
		}),
		Want:  "refused/archive-missing",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "refuse archive-missing"},
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "1", "password", "old")
			require.Zero(t, e.api.Calls(kubetest.Update))
		},
	}})
}

// restoreSetup builds genuine history v1 (password v1) and v2 (password
// v2), live at version 3 (password v3).
func restoreSetup(e *env) *corev1.Secret { return e.history(2) }

func TestFamilyRestore(t *testing.T) {
	t.Parallel()
	restored := func(t *testing.T, e *env, o outcome) {
		requireLive(t, e, "4", "password", "v1")
		require.Equal(t, []string{"v1", "v2", "v3"}, snapshotsOf(e, "uid-0001"))
		require.Equal(t, kubetest.Data("password", "v3"), e.snap("uid-0001", 3).Data)
		require.InDelta(t, 1, o.ending()["restoredVersion"], 0)
		requireWrites(t, e, map[string]int{testName: 1, snapName(3): 1})
	}
	runRows(t, []row{{
		Name: "applied",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			return e.restore(e.rv(), 1)
		}),
		Want: "completed",
		Trail: []string{"call create-snapshot v3", "result create-snapshot v3 applied", "call replace-live", "result replace-live applied",
			"complete completed"},
		Check: restored,
	}, {
		Name: "lost after apply: ours",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.AppliedLost())
			return e.restore(e.rv(), 1)
		}),
		Want: "converged",
		Trail: []string{"call create-snapshot v3", "result create-snapshot v3 applied", "call replace-live", "result replace-live unknown/lost",
			"resolve replace-live ours", "complete converged"},
		Check: restored,
	}, {
		Name: "lost before apply: sent again with the target's data",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.LostBefore())
			return e.restore(e.rv(), 1)
		}),
		Want: "completed",
		Trail: []string{"call create-snapshot v3", "result create-snapshot v3 applied", "call replace-live", "result replace-live unknown/lost",
			"resolve replace-live not-applied/resource-version-unchanged", "call replace-live", "result replace-live applied", "complete completed"},
		Check: restored,
	}, {
		Name: "the target deleted by someone before the resolution: theirs",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.LostBefore().First(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, snapName(1)) }))
			return e.restore(e.rv(), 1)
		}),
		Want: "refused/version-absent",
		Trail: []string{"call create-snapshot v3", "result create-snapshot v3 applied", "call replace-live", "result replace-live unknown/lost",
			"resolve replace-live theirs/version-absent", "refuse version-absent"},
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "3", "password", "v3")
		},
	}, {
		Name: "a version at the counter: version-ahead",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			return e.restore(e.rv(), 3)
		}),
		Want:  "refused/version-ahead",
		Trail: []string{"refuse version-ahead"},
		Check: func(t *testing.T, e *env, _ outcome) {
			require.Zero(t, e.api.Calls(kubetest.List)+e.api.Calls(kubetest.Create))
			requireWrites(t, e, nil)
		},
	}, {
		Name: "a version above the counter: version-ahead",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			return e.restore(e.rv(), 9)
		}),
		Want:  "refused/version-ahead",
		Trail: []string{"refuse version-ahead"},
		Check: func(t *testing.T, e *env, _ outcome) { requireWrites(t, e, nil) },
	}, {
		Name: "a planted look-alike target: foreign-snapshot, never read",
		Setup: given(func(e *env) *Command {
			live := e.seedLive("5", "password", "v5")
			e.plant(live, 3)
			return e.restore(e.rv(), 3)
		}),
		Want:  "refused/foreign-snapshot",
		Trail: []string{"refuse foreign-snapshot"},
		Check: func(t *testing.T, e *env, _ outcome) {
			require.Zero(t, e.api.Count(kubetest.Get, kubetest.Secrets, SnapshotName("uid-0001", 3)), "its data is never read")
			requireWrites(t, e, nil)
		},
	}, {
		Name: "an absent version: version-absent",
		Setup: given(func(e *env) *Command {
			e.seedLive("5", "password", "v5")
			return e.restore(e.rv(), 3)
		}),
		Want:  "refused/version-absent",
		Trail: []string{"refuse version-absent"},
		Check: func(t *testing.T, e *env, _ outcome) { requireWrites(t, e, nil) },
	}, {
		Name: "a restore onto an immutable Secret holding the target's data: existing",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			edit(e.api.Server, testName, func(s *corev1.Secret) {
				immutable := true
				s.Immutable, s.Data = &immutable, kubetest.Data("password", "v1")
			})
			return e.restore(e.rv(), 1)
		}),
		Want:  "existing",
		Trail: []string{"complete existing"},
		Check: func(t *testing.T, e *env, _ outcome) { requireWrites(t, e, nil) },
	}})
}

func TestFamilyGuards(t *testing.T) {
	t.Parallel()
	none := func(t *testing.T, e *env, _ outcome) { requireWrites(t, e, nil) }
	runRows(t, []row{{
		Name: "counter-behind: keyledger's own history above the live counter",
		Setup: given(func(e *env) *Command {
			e.history(2) // v1, v2; live at 3
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Annotations[AnnotationVersion] = "1" })
			return e.update(e.rv(), "password", "x")
		}),
		Want:  "refused/counter-behind",
		Trail: []string{"refuse counter-behind"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.InDelta(t, 2, o.ending()["newestVersion"], 0)
			none(t, e, o)
		},
	}, {
		Name: "counter-behind: an unsettled snapshot of ours above the counter",
		Setup: given(func(e *env) *Command {
			e.seedLive("2", "password", "v2")
			first := e.update(e.rv(), "password", "v3")
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(2), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Status(kubetest.ServerError()))
			}))
			e.first = e.run(first) // snapshot v2 made, its answer lost: unsettled
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Annotations[AnnotationVersion] = "1" })
			return e.update(e.rv(), "password", "x")
		}),
		Want:  "refused/counter-behind",
		Trail: []string{"refuse counter-behind"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "uncertain/read-failed", e.first.Ending())
			require.InDelta(t, 2, o.ending()["newestVersion"], 0)
			require.NotNil(t, e.snap("uid-0001", 2), "left alone")
			none(t, e, o)
		},
	}, {
		Name: "a stale expectedResourceVersion: refused before any write",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "password", "v1")
			return e.update("999", "password", "x")
		}),
		Want:  "refused/stale-resource-version",
		Trail: []string{"refuse stale-resource-version"},
		Check: none,
	}, {
		Name: "the size guard: invalid before the journal is opened",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "password", "v1")
			return e.update(e.rv(), "big", strings.Repeat("x", MaxSecretBytes))
		}),
		Want: "invalid",
		Check: func(t *testing.T, e *env, o outcome) {
			require.Empty(t, o.records, "nothing journaled")
			_, err := e.j.Load(context.Background(), "", o.mutationID)
			require.ErrorIs(t, err, store.ErrNotFound, "nothing journaled")
			none(t, e, o)
		},
	}, {
		Name: "a service-account token is never versioned",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "token", "t")
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Type = corev1.SecretTypeServiceAccountToken })
			return e.update(e.rv(), "token", "x")
		}),
		Want:  "refused/service-account-token",
		Trail: []string{"refuse service-account-token"},
		Check: none,
	}, {
		Name: "a malformed counter",
		Setup: given(func(e *env) *Command {
			e.seedLive("07", "a", "1")
			return e.update(e.rv(), "a", "2")
		}),
		Want:  "refused/version-malformed",
		Trail: []string{"refuse version-malformed"},
		Check: none,
	}})
}

func TestFamilyReplay(t *testing.T) {
	t.Parallel()
	// A replay journals and writes nothing; it reads what confirms the
	// operation's effect (ConfirmReplay): lists only for a delete without
	// history, whose snapshots must be gone.
	replayed := func(t *testing.T, e *env, o outcome) {
		t.Helper()
		require.Equal(t, e.first.records, o.records, "a replay journals nothing")
		require.Zero(t, e.api.Calls(kubetest.Create)+e.api.Calls(kubetest.Update)+e.api.Calls(kubetest.Delete), "nothing sent")
		requireWrites(t, e, nil)
	}
	listed := func(n int) func(t *testing.T, e *env, o outcome) {
		return func(t *testing.T, e *env, o outcome) {
			t.Helper()
			replayed(t, e, o)
			require.Equal(t, n, e.api.Calls(kubetest.List), "lists")
		}
	}
	runRows(t, []row{{
		Name: "a completed update",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.first = e.run(cmd)
			return cmd
		}),
		Want:  "replayed existing",
		Trail: traceUpdate,
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "completed", e.first.Ending())
			listed(0)(t, e, o)
		},
	}, {
		Name: "a completed update, the live Secret changed since: still a replay",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.first = e.run(cmd)
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Data["password"] = []byte("later") })
			return cmd
		}),
		Want:  "replayed existing",
		Trail: traceUpdate,
		Check: listed(0),
	}, {
		Name: "a refused restore",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			cmd := e.restore(e.rv(), 7)
			e.first = e.run(cmd)
			return cmd
		}),
		Want:  "replayed refused/version-ahead",
		Trail: []string{"refuse version-ahead"},
		Check: replayed,
	}, {
		Name: "a completed delete",
		Setup: given(func(e *env) *Command {
			cmd := purgeSetup(e)
			e.first = e.run(cmd)
			return cmd
		}),
		Want:  "replayed existing",
		Check: listed(1),
	}})
}

// lostAndUnread scripts a lost answer to verb on name whose resolution's
// first read of readName fails: the run ends uncertain (read-failed),
// left resolving.
func lostAndUnread(e *env, verb kubetest.Verb, name, readName string) {
	e.api.On(verb, kubetest.Secrets, name, kubetest.AppliedLost().First(func(d *kubetest.Server) {
		d.On(kubetest.Get, kubetest.Secrets, readName, kubetest.Status(kubetest.ServerError()))
	}))
}

func TestFamilyDecisions(t *testing.T) {
	t.Parallel()
	none := func(t *testing.T, e *env, _ outcome) { requireWrites(t, e, nil) }
	big := strings.Repeat("x", MaxSecretBytes)
	runRows(t, []row{{
		Name:  "an update of an absent Secret: secret-absent",
		Setup: given(func(e *env) *Command { return e.update("7", "a", "1") }),
		Want:  "refused/secret-absent",
		Trail: []string{"refuse secret-absent"},
		Check: none,
	}, {
		Name: "removing a key the Secret does not hold: key-absent",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "a", "1")
			c := e.update(e.rv())
			c.RemoveKeys = []string{"b"}
			return c
		}),
		Want:  "refused/key-absent",
		Trail: []string{"refuse key-absent"},
		Check: none,
	}, {
		Name: "removing a key: archived, then written without it",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "a", "1", "b", "2")
			c := e.update(e.rv())
			c.RemoveKeys = []string{"b"}
			return c
		}),
		Want:  "completed",
		Trail: traceUpdate,
		Check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "2", "a", "1")
			require.Equal(t, kubetest.Data("a", "1", "b", "2"), e.snap("uid-0001", 1).Data)
		},
	}, {
		Name: "removing a key of a Secret over the limit: invalid before the journal",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "a", "1", "big", big+"y")
			c := e.update(e.rv())
			c.RemoveKeys = []string{"a"}
			return c
		}),
		Want: "invalid",
		Check: func(t *testing.T, e *env, o outcome) {
			_, err := e.j.Load(context.Background(), "", o.mutationID)
			require.ErrorIs(t, err, store.ErrNotFound, "nothing journaled")
			none(t, e, o)
		},
	}, {
		Name:  "creating a Secret over the guard: invalid before the journal",
		Setup: given(func(e *env) *Command { return e.update("", "big", big) }),
		Want:  "invalid",
		Check: func(t *testing.T, e *env, o outcome) {
			_, err := e.j.Load(context.Background(), "", o.mutationID)
			require.ErrorIs(t, err, store.ErrNotFound, "nothing journaled")
			none(t, e, o)
		},
	}, {
		Name: "an immutable Secret is never updated",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "a", "1")
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Immutable = new(bool); *s.Immutable = true })
			return e.update(e.rv(), "a", "2")
		}),
		Want:  "refused/immutable",
		Trail: []string{"refuse immutable"},
		Check: none,
	}, {
		Name: "a restore onto an immutable Secret with other data: immutable",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Immutable = new(bool); *s.Immutable = true })
			return e.restore(e.rv(), 1)
		}),
		Want:  "refused/immutable",
		Trail: []string{"refuse immutable"},
		Check: none,
	}, {
		Name: "a restore of data over the API server's limit: too-large",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "a", "1", "big", big+"y")
			c := e.update(e.rv())
			c.RemoveKeys = []string{"big"}
			require.Equal(t, "completed", e.run(c).Ending())
			return e.restore(e.rv(), 1)
		}),
		Want:  "refused/too-large",
		Trail: []string{"refuse too-large"},
		Check: none,
	}, {
		Name: "a terminating Secret is never written",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "a", "1")
			edit(e.api.Server, testName, kubetest.BeingDeleted)
			return e.update(e.rv(), "a", "2")
		}),
		Want:  "refused/terminating",
		Trail: []string{"refuse terminating"},
		Check: none,
	}, {
		// Every list fails: the prefetch's, then the first decision's.
		Name:  "the history list fails before any call: unavailable, nothing journaled but the preparation",
		Setup: given(scripted(seedV1, kubetest.List, "", kubetest.Status(kubetest.ServerError()).Always())),
		Want:  "unavailable/kubernetes",
		Trail: []string{},
		Check: none,
	}, {
		Name:  "the listing made ahead fails: the first decision lists again",
		Setup: given(scripted(seedV1, kubetest.List, "", kubetest.Status(kubetest.ServerError()))),
		Want:  "completed",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live applied", "complete completed"},
		Check: func(t *testing.T, e *env, _ outcome) {
			require.Equal(t, 2, e.api.Calls(kubetest.List), "the prefetch's list, then the decision's")
			requireLive(t, e, "2", "password", "new")
		},
	}, {
		Name: "resume from answered after a recreate under the same name: uid-changed",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Status(kubetest.ServerError()))
			}))
			e.first = e.run(cmd)
			e.api.Remove(kubetest.Secrets, testName)
			e.seedLive("1", "password", "old")
			return cmd
		}),
		Want:  "refused/uid-changed",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "refuse uid-changed"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "uncertain/interrupted", e.first.Ending())
			require.Equal(t, store.StateAnswered, e.first.res.Run.Op.State)
			require.Equal(t, 2, o.observations(), "the new UID is journaled")
			require.Equal(t, "uid-0003", o.last(store.RecordObservation, StepReadLive).UID)
			none(t, e, o)
		},
	}, {
		Name: "the archive gets a finalizer before the live write: snapshot-finalizers",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
					edit(d, snapName(1), kubetest.Held)
				}))
			}))
			return cmd
		}),
		Want:  "refused/snapshot-finalizers",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "refuse snapshot-finalizers"},
		Check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		Name: "the archive is being deleted before the live write: snapshot-terminating",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
					edit(d, snapName(1), kubetest.BeingDeleted)
				}))
			}))
			return cmd
		}),
		Want:  "refused/snapshot-terminating",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "refuse snapshot-terminating"},
		Check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		Name: "a rerun under a new mutationId of an applied update: existing, nothing written",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			require.Equal(t, "completed", e.run(cmd).Ending())
			return e.update(cmd.ExpectedResourceVersion, "password", "new")
		}),
		Want:  "existing",
		Trail: []string{"complete existing"},
		Check: none,
	}, {
		Name: "a rerun under a new mutationId with other data: stale",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			require.Equal(t, "completed", e.run(cmd).Ending())
			return e.update(cmd.ExpectedResourceVersion, "password", "other")
		}),
		Want:  "refused/stale-resource-version",
		Trail: []string{"refuse stale-resource-version"},
		Check: none,
	}, {
		Name: "a rerun under a new mutationId of an applied restore: existing",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			cmd := e.restore(e.rv(), 1)
			require.Equal(t, "completed", e.run(cmd).Ending())
			return e.restore(cmd.ExpectedResourceVersion, 1)
		}),
		Want:  "existing",
		Trail: []string{"complete existing"},
		Check: none,
	}, {
		Name: "a stale delete: refused",
		Setup: given(func(e *env) *Command {
			e.seedLive("3", "a", "1")
			return e.delete("999", true)
		}),
		Want:  "refused/stale-resource-version",
		Trail: []string{"refuse stale-resource-version"},
		Check: none,
	}, {
		Name: "a mutating admission changes the created Secret: result-mismatch, theirs",
		Setup: given(func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.Admission(kubetest.OnSecret(func(s *corev1.Secret) { s.Data["injected"] = []byte("x") })).Always())
			return e.update("", "a", "1")
		}),
		Want:  "refused/already-exists",
		Trail: []string{"call create-live", "result create-live unknown/result-mismatch", "resolve create-live theirs/already-exists", "refuse already-exists"},
		Check: func(t *testing.T, e *env, _ outcome) { require.Equal(t, 1, e.api.Writes(kubetest.Secrets, testName)) },
	}, {
		Name: "a mutating admission changes the snapshot: result-mismatch, source-conflict",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Admission(kubetest.OnSecret(func(s *corev1.Secret) { s.Data["injected"] = []byte("x") })).Always())
			return cmd
		}),
		Want: "refused/source-conflict",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/result-mismatch", "resolve create-snapshot v1 theirs/source-conflict",
			"refuse source-conflict"},
		Check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		Name: "a mutating admission changes the live write: result-mismatch, theirs",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.Admission(kubetest.OnSecret(func(s *corev1.Secret) { s.Data["injected"] = []byte("x") })).Always())
			return cmd
		}),
		Want: "refused/changed-concurrently",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live unknown/result-mismatch",
			"resolve replace-live theirs/changed-concurrently", "refuse changed-concurrently"},
		Check: func(t *testing.T, e *env, _ outcome) { require.Equal(t, 1, e.api.Writes(kubetest.Secrets, testName)) },
	}})
}

func TestFamilyResolutions(t *testing.T) {
	t.Parallel()
	runRows(t, []row{{
		Name: "the snapshot's re-read fails: undetermined",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			lostAndUnread(e, kubetest.Create, snapName(1), snapName(1))
			return cmd
		}),
		Want:  "uncertain/read-failed",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 undetermined/read-failed"},
		Check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		Name: "the live Secret changed before the snapshot's resolution: changed-concurrently",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) { s.Data["password"] = []byte("theirs") })
			}))
			return cmd
		}),
		Want: "refused/changed-concurrently",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 theirs/changed-concurrently",
			"refuse changed-concurrently"},
		Check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "theirs") },
	}, {
		Name: "the occupant carries our nonce but other data: source-conflict",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
					edit(d, snapName(1), func(s *corev1.Secret) { s.Data["password"] = []byte("copied-nonce") })
				}))
			}))
			return cmd
		}),
		Want: "refused/source-conflict",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 theirs/source-conflict",
			"refuse source-conflict"},
		Check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		Name: "our occupant is being deleted: snapshot-terminating",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
					edit(d, snapName(1), kubetest.BeingDeleted)
				}))
			}))
			return cmd
		}),
		Want: "refused/snapshot-terminating",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 theirs/snapshot-terminating",
			"refuse snapshot-terminating"},
		Check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		Name: "our occupant holds a finalizer: snapshot-finalizers",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
					edit(d, snapName(1), kubetest.Held)
				}))
			}))
			return cmd
		}),
		Want: "refused/snapshot-finalizers",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 theirs/snapshot-finalizers",
			"refuse snapshot-finalizers"},
		Check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		// Our live write landed, but the archive it stood on is gone: it
		// cannot be proven ours, so it is reported as someone else's.
		Name:  "the live write landed but its archive vanished before the re-read: changed-concurrently",
		Setup: given(scripted(seedV1, kubetest.Update, testName, kubetest.AppliedLost().First(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, snapName(1)) }))),
		Want:  "refused/changed-concurrently",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live unknown/lost",
			"resolve replace-live theirs/changed-concurrently", "refuse changed-concurrently"},
		Check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "2", "password", "new") },
	}, {
		Name: "the archive's re-read fails while resolving the live write: undetermined",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			lostAndUnread(e, kubetest.Update, testName, snapName(1))
			return cmd
		}),
		Want: "uncertain/read-failed",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live unknown/lost",
			"resolve replace-live undetermined/read-failed"},
		Check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "2", "password", "new") },
	}, {
		Name: "a look-alike replaced the archive before the live write's re-read: changed-concurrently",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			live := e.live()
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.Remove(kubetest.Secrets, snapName(1))
				d.SeedSecret(lookalike(live, 1))
			}))
			return cmd
		}),
		Want: "refused/changed-concurrently",
		Trail: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live unknown/lost",
			"resolve replace-live theirs/changed-concurrently", "refuse changed-concurrently"},
		Check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "2", "password", "new") },
	}, {
		Name: "the live delete's re-read fails: undetermined",
		Setup: given(func(e *env) *Command {
			e.seedLive("1", "a", "1")
			lostAndUnread(e, kubetest.Delete, testName, testName)
			return e.delete(e.rv(), true)
		}),
		Want:  "uncertain/read-failed",
		Trail: []string{"call delete-live", "result delete-live unknown/lost", "resolve delete-live undetermined/read-failed"},
		Check: func(t *testing.T, e *env, _ outcome) { require.Nil(t, e.live()) },
	}, {
		Name: "the live delete lost, finalizers hold it: ours pending, then pending",
		Setup: given(func(e *env) *Command {
			e.api.SeedSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: testName, Finalizers: []string{"example.com/hold"}}, Data: kubetest.Data("a", "1")})
			e.api.On(kubetest.Delete, kubetest.Secrets, testName, kubetest.AppliedLost())
			return e.delete(e.rv(), true)
		}),
		Want:  "pending",
		Trail: []string{"call delete-live", "result delete-live unknown/lost", "resolve delete-live ours", "complete pending"},
		Check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "pending", workflowtest.Fields(o.last(store.RecordResolution, StepDeleteLive).Detail)["deletion"])
		},
	}, {
		Name: "the delete answered, yet the same object is there unchanged: result-mismatch",
		Setup: given(func(e *env) *Command {
			live := e.seedLive("1", "a", "1")
			e.api.On(kubetest.Delete, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) { d.Put(kubetest.Secrets, live) }))
			}))
			return e.delete(e.rv(), true)
		}),
		Want:  "refused/result-mismatch",
		Trail: []string{"call delete-live", "result delete-live applied", "refuse result-mismatch"},
		Check: func(t *testing.T, e *env, _ outcome) { require.NotNil(t, e.live()) },
	}, {
		Name: "a snapshot delete's re-read fails: undetermined",
		Setup: given(func(e *env) *Command {
			cmd := purgeSetup(e)
			lostAndUnread(e, kubetest.Delete, snapName(1), snapName(1))
			return cmd
		}),
		Want:  "uncertain/read-failed",
		Trail: []string{"call delete-snapshot v1", "result delete-snapshot v1 unknown/lost", "resolve delete-snapshot v1 undetermined/read-failed"},
		Check: func(t *testing.T, e *env, _ outcome) { require.NotNil(t, e.live()) },
	}})
}

func TestFamilyRestoreTarget(t *testing.T) {
	t.Parallel()
	none := func(t *testing.T, e *env, _ outcome) { requireWrites(t, e, nil) }
	runRows(t, []row{{
		Name: "the target is being deleted: snapshot-invalid",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			edit(e.api.Server, snapName(1), kubetest.BeingDeleted)
			return e.restore(e.rv(), 1)
		}),
		Want:  "refused/snapshot-invalid",
		Trail: []string{"refuse snapshot-invalid"},
		Check: none,
	}, {
		Name: "the target was taken from another type of Secret: snapshot-invalid",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Type = "example.com/other" })
			return e.restore(e.rv(), 1)
		}),
		Want:  "refused/snapshot-invalid",
		Trail: []string{"refuse snapshot-invalid"},
		Check: none,
	}, {
		Name: "the target deleted between the list and its read: version-absent",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			e.api.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, snapName(1)) }))
			return e.restore(e.rv(), 1)
		}),
		Want:  "refused/version-absent",
		Trail: []string{"refuse version-absent"},
		Check: none,
	}, {
		Name: "the target's metadata edited between the list and its read: snapshot-invalid",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			e.api.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, snapName(1), func(s *corev1.Secret) { s.Annotations["extra"] = "x" })
			}))
			return e.restore(e.rv(), 1)
		}),
		Want:  "refused/snapshot-invalid",
		Trail: []string{"refuse snapshot-invalid"},
		Check: none,
	}, {
		Name: "the target's read fails: unavailable, nothing sent",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			e.api.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Status(kubetest.ServerError()))
			return e.restore(e.rv(), 1)
		}),
		Want:  "unavailable/kubernetes",
		Trail: []string{},
		Check: none,
	}, {
		Name: "a rerun under a new mutationId after the target vanished: stale, not existing",
		Setup: given(func(e *env) *Command {
			restoreSetup(e)
			cmd := e.restore(e.rv(), 1)
			require.Equal(t, "completed", e.run(cmd).Ending())
			e.api.Remove(kubetest.Secrets, snapName(1))
			return e.restore(cmd.ExpectedResourceVersion, 1)
		}),
		Want:  "refused/stale-resource-version",
		Trail: []string{"refuse stale-resource-version"},
		Check: none,
	}, {
		Name: "a rerun under a new mutationId whose archive is not the expected state: stale",
		Setup: given(func(e *env) *Command {
			cmd := seedV1(e)
			require.Equal(t, "completed", e.run(cmd).Ending())
			return e.update("999", "password", "new")
		}),
		Want:  "refused/stale-resource-version",
		Trail: []string{"refuse stale-resource-version"},
		Check: none,
	}})
}

// failingReader is a journal whose reads of other operations fail.
type failingReader struct{}

func (failingReader) StepRecords(context.Context, store.StepRecordsParams) ([][]store.Record, error) {
	return nil, errors.New("connection refused")
}

func (failingReader) FindInRuns(context.Context, store.RunRecordParams) (*store.RunRecord, error) {
	return nil, errors.New("connection refused")
}

func TestFamilyJournalReadFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd := seedV1(e)
	f := plan(cmd, e.api, e.limit).Family.(*family)
	f.BindJournal(failingReader{})
	run := &workflow.Run{Op: &store.Operation{State: store.StatePrepared}}
	_, err := f.Decide(context.Background(), run)
	var unavailable *workflow.Unavailable
	require.ErrorAs(t, err, &unavailable)
	require.Equal(t, "postgresql", unavailable.Dependency)

	// Resolving a create-snapshot needs the journal's proof too.
	e.api.SeedSecret(snapshotOf(e.live(), 1, time.Now(), "x/y"))
	v, err := f.Resolve(context.Background(), run, store.Record{Kind: store.RecordAuthorityCall, Step: StepCreateSnapshot,
		Target: store.SecretTarget(testNamespace, snapName(1)), UID: "uid-0001", ResourceVersion: e.rv()})
	require.NoError(t, err)
	require.Equal(t, workflow.Undetermined, v.Kind)
	require.Zero(t, e.api.Calls(kubetest.Create)+e.api.Calls(kubetest.Update)+e.api.Calls(kubetest.Delete))
}

func TestFamilyResolveUnknownStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := plan(e.update("", "a", "1"), e.api, e.limit).Family.(*family)
	_, err := f.Resolve(context.Background(), &workflow.Run{}, store.Record{Step: "bogus"})
	require.ErrorContains(t, err, `unknown step "bogus"`)
}

func TestCallVersion(t *testing.T) {
	t.Parallel()
	v, err := callVersion(store.Record{Detail: store.DetailOf(map[string]any{"version": 7})})
	require.NoError(t, err)
	require.Equal(t, int64(7), v)
	v, err = callVersion(store.Record{})
	require.NoError(t, err)
	require.Zero(t, v)
	_, err = callVersion(store.Record{Kind: store.RecordAuthorityCall, Step: StepReplaceLive, Detail: store.DetailOf(map[string]any{"version": "7"})})
	require.ErrorContains(t, err, "reading the authority_call record of replace-live", "a version that is no number is an error, never 0")
}

// TestFamilyReadsPerDecision counts the API reads of one update, prune
// included: one read of the live Secret and one history listing per run
// (runReads), and the archive read again before the live write.
func TestFamilyReadsPerDecision(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd := seedV1(e)
	require.Equal(t, "completed", e.run(cmd).Ending())
	// One history listing per run: the precheck's GET serves decision 1
	// (archive: LIST); decision 2 (write) reads the archive again (GET),
	// the live Secret and the listing it reuses (the replace's
	// resourceVersion precondition stands for a second live read).
	require.Equal(t, map[kubetest.Verb]int{kubetest.Get: 2, kubetest.List: 1, kubetest.Create: 1, kubetest.Update: 1}, e.api.VerbCounts())

	e = newEnv(t)
	cmd = twoVersions(e)
	e.api.ResetCounts()
	require.Equal(t, "completed", e.run(cmd).Ending())
	// precheck GET; archive: LIST; prune: the run's reads, with the
	// archive's create answer folded in; write: GET archive.
	require.Equal(t, map[kubetest.Verb]int{kubetest.Get: 2, kubetest.List: 1, kubetest.Create: 1, kubetest.Delete: 1, kubetest.Update: 1}, e.api.VerbCounts())
}

// TestPlanBuildsTheRealAdapter: Plan wires the family to kube's adapter,
// bound to the command's namespace and name, with the family's rights and
// the precheck; nothing is contacted to build it.
func TestPlanBuildsTheRealAdapter(t *testing.T) {
	t.Parallel()
	client, err := kube.NewClient(&rest.Config{Host: "https://127.0.0.1:1"})
	require.NoError(t, err)
	e := newEnv(t)
	cmd := e.restore("5", 2)
	p := Plan(cmd, client, 7)
	f := p.Family.(*family)
	api, ok := f.api.(*kube.VersionedSecrets)
	require.True(t, ok, "the real adapter")
	require.Equal(t, testNamespace, api.Namespace())
	require.Equal(t, testName, api.Name())
	require.Equal(t, 7, f.limit)
	require.Equal(t, Rules(testName), p.Rights.Rules)
	require.Equal(t, map[string]any{"expectedResourceVersion": "5", "version": float64(2)}, workflowtest.Fields(p.Prepare.Detail))
	require.NotNil(t, p.Precheck)
}

// noClose keeps the env's journal open after DryRun closes its store.
type noClose struct{ *workflowtest.Journal }

func (noClose) Close() {}

// dryRun runs cmd as `keyledger plan` does after the permission matrix.
func (e *env) dryRun(cmd *Command) (*workflow.DryRunResult, error) {
	e.t.Helper()
	p := plan(cmd, e.api, e.limit)
	p.Access, p.Rights = nil, nil
	return workflow.DryRun(context.Background(), workflow.Deps{
		OpenStore: func(context.Context) (workflow.Store, error) { return noClose{e.j}, nil },
	}, p)
}

func TestFamilyDryRun(t *testing.T) {
	t.Parallel()
	steps := func(r *workflow.DryRunResult) []string {
		var out []string
		for _, c := range r.Calls() {
			out = append(out, outcome{records: []store.Record{c}}.Trail()...)
		}
		return out
	}
	t.Run("an update with retention lists the archive, the prune and the write, and sends nothing", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		cmd := twoVersions(e)
		e.api.ResetCounts()
		r, err := e.dryRun(cmd)
		require.NoError(t, err)
		require.Empty(t, r.Stopped)
		require.Equal(t, workflow.OutcomeCompleted, r.Outcome)
		require.Equal(t, []string{"call create-snapshot v3", "call prune-snapshot v1", "call replace-live"}, steps(r))
		require.Zero(t, e.api.Calls(kubetest.Create)+e.api.Calls(kubetest.Update)+e.api.Calls(kubetest.Delete))
		requireWrites(t, e, nil)
	})
	t.Run("a delete without history lists every snapshot delete and the live delete", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		cmd := purgeSetup(e)
		e.api.ResetCounts()
		r, err := e.dryRun(cmd)
		require.NoError(t, err)
		require.Empty(t, r.Stopped)
		require.Equal(t, OutcomeDeleted, r.Outcome)
		require.Equal(t, []string{"call delete-snapshot v1", "call delete-snapshot v2", "call delete-live"}, steps(r))
		require.Equal(t, "deleted", workflowtest.Fields(r.Summary)["history"])
		require.Zero(t, e.api.Calls(kubetest.Delete))
		requireWrites(t, e, nil)
	})
	t.Run("a delete keeping history: the planned delete counts as done", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.history(1)
		r, err := e.dryRun(e.delete(e.rv(), true))
		require.NoError(t, err)
		require.Equal(t, OutcomeDeleted, r.Outcome)
		require.Equal(t, "kept", workflowtest.Fields(r.Summary)["history"])
		require.Equal(t, []string{"call delete-live"}, steps(r))
		require.NotNil(t, e.live())
	})
}
