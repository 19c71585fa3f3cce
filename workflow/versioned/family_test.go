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

// famRow is one scenario: setup builds the world (and may run earlier
// commands) and returns the command to run; want is the run's ending
// (outcome.word), trace the operation's journal in short (outcome.trace),
// check the objects afterwards.
type famRow struct {
	name  string
	setup func(e *env) *Command
	want  string
	trace []string
	check func(t *testing.T, e *env, o outcome)
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

func runRows(t *testing.T, rows []famRow) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cmd := r.setup(e)
			e.api.ResetCounts() // count this run's only
			o := e.run(cmd)
			require.Equal(t, r.want, o.word(), "ending (err: %v)", o.err)
			if r.trace != nil {
				require.Equal(t, r.trace, o.trace(), "journal")
			}
			require.NotNil(t, r.check, "every row checks the objects")
			r.check(t, e, o)
		})
	}
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
	runRows(t, []famRow{{
		name:  "applied",
		setup: func(e *env) *Command { return e.update("", "a", "1") },
		want:  "completed",
		trace: []string{"call create-live", "result create-live applied", "complete completed"},
		check: created,
	}, {
		name: "lost after apply: the created Secret is ours",
		setup: func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.AppliedLost())
			return e.update("", "a", "1")
		},
		want:  "converged",
		trace: []string{"call create-live", "result create-live unknown/lost", "resolve create-live ours", "complete converged"},
		check: created,
	}, {
		name: "lost before apply: absent, sent again",
		setup: func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.LostBefore())
			return e.update("", "a", "1")
		},
		want: "completed",
		trace: []string{"call create-live", "result create-live unknown/lost", "resolve create-live not-applied/absent",
			"call create-live", "result create-live applied", "complete completed"},
		check: created,
	}, {
		name: "409 with nothing there is settled by re-reading",
		setup: func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.Status(kubetest.AlreadyExists(kubetest.Secrets, testName)))
			return e.update("", "a", "1")
		},
		want: "completed",
		trace: []string{"call create-live", "result create-live unknown/already-exists", "resolve create-live not-applied/absent",
			"call create-live", "result create-live applied", "complete completed"},
		check: created,
	}, {
		name: "someone else creates it first: 409, theirs",
		setup: func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				d.SeedSecret(&corev1.Secret{ObjectMeta: objectMeta(testName), Type: corev1.SecretTypeOpaque, Data: kubetest.Data("a", "theirs")})
			}))
			return e.update("", "a", "1")
		},
		want:  "refused/already-exists",
		trace: []string{"call create-live", "result create-live unknown/already-exists", "resolve create-live theirs/already-exists", "refuse already-exists"},
		check: func(t *testing.T, e *env, _ outcome) {
			require.Equal(t, kubetest.Data("a", "theirs"), e.live().Data)
			requireWrites(t, e, nil)
		},
	}, {
		name: "422 is a refusal, nothing written",
		setup: func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.Status(kubetest.Invalid("Secret", testName)))
			return e.update("", "a", "1")
		},
		want:  "refused/invalid",
		trace: []string{"call create-live", "result create-live rejected/invalid", "refuse invalid"},
		check: func(t *testing.T, e *env, _ outcome) {
			require.Nil(t, e.live())
			requireWrites(t, e, nil)
		},
	}, {
		name: "resume from resolving: a 500, the re-read fails (uncertain), the rerun settles it",
		setup: func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.Status(kubetest.ServerError()).First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Status(kubetest.ServerError())) // the resolution's re-read
			}))
			cmd := e.update("", "a", "1")
			e.first = e.run(cmd)
			return cmd
		},
		want: "completed",
		trace: []string{"call create-live", "result create-live unknown/server-error", "resolve create-live undetermined/read-failed",
			"resolve create-live not-applied/absent", "call create-live", "result create-live applied", "complete completed"},
		check: func(t *testing.T, e *env, _ outcome) {
			require.Equal(t, "uncertain/read-failed", e.first.word())
			require.Equal(t, store.StateResolving, e.first.res.Run.Op.State)
			created(t, e, outcome{})
		},
	}, {
		name: "already created with the same data: existing, no call",
		setup: func(e *env) *Command {
			e.seedLive("1", "a", "1")
			return e.update("", "a", "1")
		},
		want:  "existing",
		trace: []string{"complete existing"},
		check: func(t *testing.T, e *env, o outcome) {
			requireWrites(t, e, nil)
			require.Equal(t, 1, o.observations())
		},
	}, {
		name: "another Secret of that name: already-exists, no call",
		setup: func(e *env) *Command {
			e.seedLive("", "a", "other")
			return e.update("", "a", "1")
		},
		want:  "refused/already-exists",
		trace: []string{"refuse already-exists"},
		check: func(t *testing.T, e *env, _ outcome) {
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
	runRows(t, []famRow{{
		name:  "applied",
		setup: seedV1,
		want:  "completed",
		trace: traceUpdate,
		check: func(t *testing.T, e *env, o outcome) {
			updated(t, e, o)
			require.Equal(t, 1, o.observations(), "the live read is journaled once: the second decision saw the same resourceVersion")
			require.Equal(t, int64(2), int64(o.ending()["version"].(float64)))
		},
	}, {
		name:  "lost after apply: the occupant carries the journaled nonce",
		setup: scripted(seedV1, kubetest.Create, snapName(1), kubetest.AppliedLost()),
		want:  "completed",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 ours",
			"call replace-live", "result replace-live applied", "complete completed"},
		check: updated,
	}, {
		name:  "lost before apply: absent, sent again",
		setup: scripted(seedV1, kubetest.Create, snapName(1), kubetest.LostBefore()),
		want:  "completed",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 not-applied/absent",
			"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live applied", "complete completed"},
		check: updated,
	}, {
		name:  "409 with nothing there: absent, sent again",
		setup: scripted(seedV1, kubetest.Create, snapName(1), kubetest.Status(kubetest.AlreadyExists(kubetest.Secrets, snapName(1)))),
		want:  "completed",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/already-exists", "resolve create-snapshot v1 not-applied/absent",
			"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live applied", "complete completed"},
		check: updated,
	}, {
		name: "409 from a look-alike planted just before: slot-occupied, left alone",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			live := e.live()
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				d.SeedSecret(lookalike(live, 1))
			}))
			return cmd
		},
		want: "refused/slot-occupied",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/already-exists", "resolve create-snapshot v1 theirs/slot-occupied",
			"refuse slot-occupied"},
		check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "1", "password", "old")
			require.Equal(t, "someone/else", e.snap("uid-0001", 1).Annotations[AnnotationActor], "the look-alike stays")
			requireWrites(t, e, nil)
		},
	}, {
		name: "a look-alike planted before the run in the slot: slot-occupied, nothing sent",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.plant(e.live(), 1)
			return cmd
		},
		want:  "refused/slot-occupied",
		trace: []string{"refuse slot-occupied"},
		check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, []any{snapName(1)}, o.ending()["occupied"])
			require.Equal(t, 0, e.api.Calls(kubetest.Create)+e.api.Calls(kubetest.Update)+e.api.Calls(kubetest.Delete))
			requireWrites(t, e, nil)
		},
	}, {
		name: "a look-alike above the counter: slot-occupied names the highest slot",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.plant(e.live(), 5)
			return cmd
		},
		want:  "refused/slot-occupied",
		trace: []string{"refuse slot-occupied"},
		check: func(t *testing.T, e *env, o outcome) {
			require.InDelta(t, 5, o.ending()["highestOccupied"], 0)
			require.NotNil(t, e.snap("uid-0001", 5), "never deleted")
			requireWrites(t, e, nil)
		},
	}, {
		name:  "422 is a refusal, nothing written",
		setup: scripted(seedV1, kubetest.Create, snapName(1), kubetest.Status(kubetest.Invalid("Secret", snapName(1)))),
		want:  "refused/invalid",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 rejected/invalid", "refuse invalid"},
		check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "1", "password", "old")
			require.Nil(t, e.snap("uid-0001", 1))
			requireWrites(t, e, nil)
		},
	}, {
		// The decision after the archive re-reads the live Secret: no
		// replace is sent against a resourceVersion known to be gone.
		name: "someone else's write to the live Secret before the archive: refused before the live write",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) { s.Data["password"] = []byte("theirs") })
			}))
			return cmd
		},
		want:  "refused/changed-concurrently",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "refuse changed-concurrently"},
		check: func(t *testing.T, e *env, o outcome) {
			requireLive(t, e, "1", "password", "theirs")
			require.Equal(t, 0, e.api.Calls(kubetest.Update), "no live write sent")
			require.Equal(t, 2, o.observations(), "the changed live Secret is journaled")
			requireWrites(t, e, map[string]int{snapName(1): 1})
		},
	}, {
		name: "an unsettled snapshot of another operation (its nonce journaled) is reused",
		setup: func(e *env) *Command {
			first := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Status(kubetest.ServerError()))
			}))
			e.first = e.run(first) // its create landed, its answer and re-read were lost
			second := e.update(first.ExpectedResourceVersion, "password", "new")
			return second
		},
		want: "completed",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/already-exists", "resolve create-snapshot v1 ours",
			"call replace-live", "result replace-live applied", "complete completed"},
		check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "uncertain/read-failed", e.first.word())
			requireLive(t, e, "2", "password", "new")
			require.Equal(t, true, workflowtest.Fields(o.last(store.RecordResolution, StepCreateSnapshot).Detail)["reused"], "the resolution says the snapshot was another operation's")
			requireWrites(t, e, map[string]int{testName: 1})
		},
	}, {
		name: "resume from calling: the answer was never journaled, the snapshot is there",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.failMove = func(p store.TransitionParams) bool { return p.From == store.StateCalling }
			e.first = e.run(cmd)
			e.failMove = nil
			return cmd
		},
		want: "completed",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 lost/no-result-recorded",
			"resolve create-snapshot v1 ours", "call replace-live", "result replace-live applied", "complete completed"},
		check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "uncertain/interrupted", e.first.word())
			require.Equal(t, store.StateCalling, e.first.res.Run.Op.State)
			requireLive(t, e, "2", "password", "new")
			requireWrites(t, e, map[string]int{testName: 1})
		},
	}, {
		name: "resume from calling: the create never left, it is sent again",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.LostBefore())
			e.failMove = func(p store.TransitionParams) bool { return p.From == store.StateCalling }
			e.first = e.run(cmd)
			e.failMove = nil
			return cmd
		},
		want: "completed",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 lost/no-result-recorded", "resolve create-snapshot v1 not-applied/absent",
			"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live applied", "complete completed"},
		check: updated,
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

func TestFamilyPruneSnapshot(t *testing.T) {
	t.Parallel()
	prunePrefix := []string{"call create-snapshot v3", "result create-snapshot v3 applied", "call prune-snapshot v1"}
	replaced := []string{"call replace-live", "result replace-live applied", "complete completed"}
	trace := func(middle ...string) []string {
		return append(append(append([]string{}, prunePrefix...), middle...), replaced...)
	}
	runRows(t, []famRow{{
		name:  "applied",
		setup: twoVersions,
		want:  "completed",
		trace: trace("result prune-snapshot v1 applied"),
		check: pruned,
	}, {
		name:  "lost after apply: the snapshot is gone, ours",
		setup: scripted(twoVersions, kubetest.Delete, snapName(1), kubetest.AppliedLost()),
		want:  "completed",
		trace: trace("result prune-snapshot v1 unknown/lost", "resolve prune-snapshot v1 ours"),
		check: pruned,
	}, {
		name:  "lost before apply: still there, sent again",
		setup: scripted(twoVersions, kubetest.Delete, snapName(1), kubetest.LostBefore()),
		want:  "completed",
		trace: trace("result prune-snapshot v1 unknown/lost", "resolve prune-snapshot v1 not-applied/present",
			"call prune-snapshot v1", "result prune-snapshot v1 applied"),
		check: pruned,
	}, {
		name:  "404: someone deleted it first, absent is applied",
		setup: scripted(twoVersions, kubetest.Delete, snapName(1), kubetest.Theirs(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, snapName(1)) })),
		want:  "completed",
		trace: trace("result prune-snapshot v1 applied"),
		check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "4", "password", "v4")
			require.Equal(t, []string{"v2", "v3"}, snapshotsOf(e, "uid-0001"))
			require.Zero(t, e.api.Writes(kubetest.Secrets, snapName(1)), "deleted by someone else, not by us")
		},
	}, {
		// Retention with an unsettled prune: a finalizer (someone else's
		// write) fails the delete's resourceVersion precondition; the
		// retry leaves it terminating, and the live write waits (exit
		// 75). Once it is gone, the rerun resumes from answered.
		name: "409 from someone else's finalizer, then pending: prune-pending; resume from answered completes",
		setup: func(e *env) *Command {
			cmd := twoVersions(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) { edit(d, snapName(1), kubetest.Held) }))
			e.first = e.run(cmd)
			e.api.Remove(kubetest.Secrets, snapName(1)) // the finalizer is released
			return cmd
		},
		want: "completed",
		trace: trace("result prune-snapshot v1 unknown/conflict", "resolve prune-snapshot v1 not-applied/present",
			"call prune-snapshot v1", "result prune-snapshot v1 applied"),
		check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "uncertain/prune-pending", e.first.word())
			require.Equal(t, store.StateAnswered, e.first.res.Run.Op.State)
			require.Equal(t, "pending", workflowtest.Fields(o.last(store.RecordAuthorityResult, StepPruneSnapshot).Detail)["deletion"])
			requireLive(t, e, "4", "password", "v4")
			require.Equal(t, []string{"v2", "v3"}, snapshotsOf(e, "uid-0001"))
		},
	}, {
		name: "422 (admission) leaves it in place: retried, then attempts-exhausted with the live write held",
		setup: func(e *env) *Command {
			cmd := twoVersions(e)
			for range 3 {
				e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.Status(kubetest.Invalid("Secret", snapName(1))))
			}
			return cmd
		},
		want: "uncertain/attempts-exhausted",
		trace: []string{"call create-snapshot v3", "result create-snapshot v3 applied",
			"call prune-snapshot v1", "result prune-snapshot v1 unknown/invalid", "resolve prune-snapshot v1 not-applied/present",
			"call prune-snapshot v1", "result prune-snapshot v1 unknown/invalid", "resolve prune-snapshot v1 not-applied/present",
			"call prune-snapshot v1", "result prune-snapshot v1 unknown/invalid", "resolve prune-snapshot v1 not-applied/present"},
		check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "3", "password", "v3")
			require.Equal(t, []string{"v1", "v2", "v3"}, snapshotsOf(e, "uid-0001"))
			requireWrites(t, e, map[string]int{snapName(3): 1})
		},
	}, {
		name: "the pruned slot re-occupied by another object: absent, the newcomer left alone",
		setup: func(e *env) *Command {
			cmd := twoVersions(e)
			live := e.live()
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
					d.SeedSecret(lookalike(live, 1))
				}))
			}))
			return cmd
		},
		want:  "completed",
		trace: trace("result prune-snapshot v1 unknown/lost", "resolve prune-snapshot v1 ours/slot-reoccupied"),
		check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "4", "password", "v4")
			require.Equal(t, "someone/else", e.snap("uid-0001", 1).Annotations[AnnotationActor])
		},
	}, {
		name: "a look-alike below the counter is never pruned: the oldest genuine snapshot goes",
		setup: func(e *env) *Command {
			e.history(3) // v1, v2, v3; live at 4
			e.limit = 2
			live := e.live()
			e.api.Remove(kubetest.Secrets, snapName(1))
			e.plant(live, 1)
			return e.update(live.ResourceVersion, "password", "v5")
		},
		want: "completed",
		trace: []string{"call create-snapshot v4", "result create-snapshot v4 applied", "call prune-snapshot v2", "result prune-snapshot v2 applied",
			"call replace-live", "result replace-live applied", "complete completed"},
		check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "5", "password", "v5")
			require.Equal(t, []string{"v1", "v3", "v4"}, snapshotsOf(e, "uid-0001"))
			require.Equal(t, "someone/else", e.snap("uid-0001", 1).Annotations[AnnotationActor], "the look-alike stays")
		},
	}, {
		name: "a snapshot already terminating beyond the limit: prune-pending, nothing sent for it",
		setup: func(e *env) *Command {
			cmd := twoVersions(e)
			edit(e.api.Server, snapName(1), kubetest.BeingDeleted)
			return cmd
		},
		want:  "uncertain/prune-pending",
		trace: []string{"call create-snapshot v3", "result create-snapshot v3 applied"},
		check: func(t *testing.T, e *env, _ outcome) {
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

func TestFamilyDeleteSnapshot(t *testing.T) {
	t.Parallel()
	purge := func(middle ...string) []string {
		out := append([]string{"call delete-snapshot v1"}, middle...)
		return append(out, "call delete-snapshot v2", "result delete-snapshot v2 applied", "call delete-live", "result delete-live applied", "complete deleted")
	}
	runRows(t, []famRow{{
		name:  "applied: every genuine snapshot, then the live Secret; a foreign one left alone",
		setup: purgeSetup,
		want:  "deleted",
		trace: purge("result delete-snapshot v1 applied"),
		check: func(t *testing.T, e *env, o outcome) {
			purged(t, e, o)
			requireWrites(t, e, map[string]int{snapName(1): 1, snapName(2): 1, testName: 1})
		},
	}, {
		name:  "lost after apply: gone, ours",
		setup: scripted(purgeSetup, kubetest.Delete, snapName(1), kubetest.AppliedLost()),
		want:  "deleted",
		trace: purge("result delete-snapshot v1 unknown/lost", "resolve delete-snapshot v1 ours"),
		check: purged,
	}, {
		name:  "lost before apply: still there, sent again",
		setup: scripted(purgeSetup, kubetest.Delete, snapName(1), kubetest.LostBefore()),
		want:  "deleted",
		trace: purge("result delete-snapshot v1 unknown/lost", "resolve delete-snapshot v1 not-applied/present",
			"call delete-snapshot v1", "result delete-snapshot v1 applied"),
		check: purged,
	}, {
		name:  "404: someone deleted it first",
		setup: scripted(purgeSetup, kubetest.Delete, snapName(1), kubetest.Theirs(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, snapName(1)) })),
		want:  "deleted",
		trace: purge("result delete-snapshot v1 applied"),
		check: purged,
	}, {
		name: "409 from someone else's finalizer, then pending: history-pending, the live Secret stays",
		setup: func(e *env) *Command {
			cmd := purgeSetup(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, snapName(1), kubetest.Held)
			}))
			return cmd
		},
		want: "uncertain/history-pending",
		trace: []string{"call delete-snapshot v1", "result delete-snapshot v1 unknown/conflict", "resolve delete-snapshot v1 not-applied/present",
			"call delete-snapshot v1", "result delete-snapshot v1 applied", "call delete-snapshot v2", "result delete-snapshot v2 applied"},
		check: func(t *testing.T, e *env, _ outcome) {
			require.NotNil(t, e.live(), "the live delete waits")
			require.NotNil(t, e.snap("uid-0001", 1).DeletionTimestamp)
			require.Nil(t, e.snap("uid-0001", 2))
		},
	}, {
		name: "422 (admission) leaves it in place: retried, then attempts-exhausted with the live Secret kept",
		setup: func(e *env) *Command {
			cmd := purgeSetup(e)
			for range 3 {
				e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.Status(kubetest.Invalid("Secret", snapName(1))))
			}
			return cmd
		},
		want: "uncertain/attempts-exhausted",
		trace: []string{"call delete-snapshot v1", "result delete-snapshot v1 unknown/invalid", "resolve delete-snapshot v1 not-applied/present",
			"call delete-snapshot v1", "result delete-snapshot v1 unknown/invalid", "resolve delete-snapshot v1 not-applied/present",
			"call delete-snapshot v1", "result delete-snapshot v1 unknown/invalid", "resolve delete-snapshot v1 not-applied/present"},
		check: func(t *testing.T, e *env, _ outcome) {
			require.NotNil(t, e.live())
			require.Equal(t, []string{"v1", "v2"}, snapshotsOf(e, "uid-0001"))
			requireWrites(t, e, nil)
		},
	}, {
		name: "someone else's edit of the snapshot's metadata: theirs, refused",
		setup: func(e *env) *Command {
			cmd := purgeSetup(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, snapName(1), func(s *corev1.Secret) { s.Labels["extra"] = "x" })
			}))
			return cmd
		},
		want: "refused/snapshot-invalid",
		trace: []string{"call delete-snapshot v1", "result delete-snapshot v1 unknown/conflict", "resolve delete-snapshot v1 theirs/snapshot-invalid",
			"refuse snapshot-invalid"},
		check: func(t *testing.T, e *env, o outcome) {
			require.NotNil(t, e.live())
			require.NotNil(t, e.snap("uid-0001", 1))
			require.Equal(t, map[string]any{"name": testName, "namespace": testNamespace, "uid": "uid-0001"}, o.ending()["secret"])
		},
	}, {
		name: "a snapshot already being deleted: history-pending at once, the read journaled",
		setup: func(e *env) *Command {
			cmd := purgeSetup(e)
			edit(e.api.Server, snapName(2), kubetest.BeingDeleted)
			return cmd
		},
		want:  "uncertain/history-pending",
		trace: []string{"call delete-snapshot v1", "result delete-snapshot v1 applied"},
		check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, 1, o.observations())
			require.Equal(t, store.StateAnswered, o.res.Run.Op.State)
			require.NotNil(t, e.live())
			requireWrites(t, e, map[string]int{snapName(1): 1})
		},
	}, {
		name: "only a snapshot already being deleted: history-pending before any call, the read journaled",
		setup: func(e *env) *Command {
			e.history(1)
			edit(e.api.Server, snapName(1), kubetest.BeingDeleted)
			return e.delete(e.rv(), false)
		},
		want:  "uncertain/history-pending",
		trace: []string{},
		check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, 1, o.observations(), "what the decision saw is journaled before the run ends")
			require.Equal(t, store.StatePrepared, o.res.Run.Op.State)
			requireWrites(t, e, nil)
		},
	}, {
		name: "keepHistory: no snapshot is touched",
		setup: func(e *env) *Command {
			purgeSetup(e)
			return e.delete(e.rv(), true)
		},
		want:  "deleted",
		trace: []string{"call delete-live", "result delete-live applied", "complete deleted"},
		check: func(t *testing.T, e *env, o outcome) {
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
	runRows(t, []famRow{{
		name:  "applied",
		setup: seed,
		want:  "deleted",
		trace: []string{"call delete-live", "result delete-live applied", "complete deleted"},
		check: gone,
	}, {
		name: "finalizers hold it: pending",
		setup: func(e *env) *Command {
			e.api.SeedSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: testName, Finalizers: []string{"example.com/hold"}}, Data: kubetest.Data("a", "1")})
			return e.delete(e.rv(), true)
		},
		want:  "pending",
		trace: []string{"call delete-live", "result delete-live applied", "complete pending"},
		check: func(t *testing.T, e *env, o outcome) {
			require.NotNil(t, e.live().DeletionTimestamp)
			require.InDelta(t, 1, o.ending()["finalizers"], 0)
		},
	}, {
		name:  "lost after apply: gone, ours",
		setup: scripted(seed, kubetest.Delete, testName, kubetest.AppliedLost()),
		want:  "deleted",
		trace: []string{"call delete-live", "result delete-live unknown/lost", "resolve delete-live ours", "complete deleted"},
		check: gone,
	}, {
		name:  "lost before apply: unchanged, sent again",
		setup: scripted(seed, kubetest.Delete, testName, kubetest.LostBefore()),
		want:  "deleted",
		trace: []string{"call delete-live", "result delete-live unknown/lost", "resolve delete-live not-applied/resource-version-unchanged",
			"call delete-live", "result delete-live applied", "complete deleted"},
		check: gone,
	}, {
		name: "409 from someone else's write: theirs",
		setup: func(e *env) *Command {
			cmd := seed(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) { s.Data["a"] = []byte("theirs") })
			}))
			return cmd
		},
		want:  "refused/changed-concurrently",
		trace: []string{"call delete-live", "result delete-live unknown/conflict", "resolve delete-live theirs/changed-concurrently", "refuse changed-concurrently"},
		check: func(t *testing.T, e *env, _ outcome) {
			require.Equal(t, kubetest.Data("a", "theirs"), e.live().Data)
			requireWrites(t, e, nil)
		},
	}, {
		name:  "404: someone deleted it first",
		setup: scripted(seed, kubetest.Delete, testName, kubetest.Theirs(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, testName) })),
		want:  "deleted",
		trace: []string{"call delete-live", "result delete-live applied", "complete deleted"},
		check: func(t *testing.T, e *env, _ outcome) {
			require.Nil(t, e.live())
			requireWrites(t, e, nil)
		},
	}, {
		name:  "422 is a refusal",
		setup: scripted(seed, kubetest.Delete, testName, kubetest.Status(kubetest.Invalid("Secret", testName))),
		want:  "refused/invalid",
		trace: []string{"call delete-live", "result delete-live rejected/invalid", "refuse invalid"},
		check: func(t *testing.T, e *env, _ outcome) {
			require.NotNil(t, e.live())
			requireWrites(t, e, nil)
		},
	}, {
		name: "recreated by someone else after our delete: deleted, the newcomer named",
		setup: func(e *env) *Command {
			cmd := seed(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
					d.SeedSecret(&corev1.Secret{ObjectMeta: objectMeta(testName), Data: kubetest.Data("a", "new")})
				}))
			}))
			return cmd
		},
		want:  "deleted",
		trace: []string{"call delete-live", "result delete-live applied", "complete deleted"},
		check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "uid-0002", o.ending()["recreatedUID"])
			require.Equal(t, kubetest.Data("a", "new"), e.live().Data)
		},
	}, {
		name: "resume from answered: the delete applied, the confirming read failed",
		setup: func(e *env) *Command {
			cmd := seed(e)
			e.api.On(kubetest.Delete, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Status(kubetest.ServerError()))
			}))
			e.first = e.run(cmd)
			return cmd
		},
		want:  "deleted",
		trace: []string{"call delete-live", "result delete-live applied", "complete deleted"},
		check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "uncertain/interrupted", e.first.word())
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
	runRows(t, []famRow{{
		name:  "lost after apply: version 2 with exactly our data is ours",
		setup: scripted(seedV1, kubetest.Update, testName, kubetest.AppliedLost()),
		want:  "converged",
		trace: trace("result replace-live unknown/lost", "resolve replace-live ours", "complete converged"),
		check: func(t *testing.T, e *env, o outcome) {
			updated(t, e, o)
			require.InDelta(t, 2, o.ending()["version"], 0)
		},
	}, {
		name:  "lost before apply: unchanged, the same compare-and-set sent again",
		setup: scripted(seedV1, kubetest.Update, testName, kubetest.LostBefore()),
		want:  "completed",
		trace: trace("result replace-live unknown/lost", "resolve replace-live not-applied/resource-version-unchanged",
			"call replace-live", "result replace-live applied", "complete completed"),
		check: updated,
	}, {
		name:  "409 with nothing changed: sent again",
		setup: scripted(seedV1, kubetest.Update, testName, kubetest.Status(kubetest.Conflict(kubetest.Secrets, testName))),
		want:  "completed",
		trace: trace("result replace-live unknown/conflict", "resolve replace-live not-applied/resource-version-unchanged",
			"call replace-live", "result replace-live applied", "complete completed"),
		check: updated,
	}, {
		name:  "500 with nothing changed: re-read, sent again",
		setup: scripted(seedV1, kubetest.Update, testName, kubetest.Status(kubetest.ServerError())),
		want:  "completed",
		trace: trace("result replace-live unknown/server-error", "resolve replace-live not-applied/resource-version-unchanged",
			"call replace-live", "result replace-live applied", "complete completed"),
		check: updated,
	}, {
		name: "resume from calling: the live write landed, its answer never journaled",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.failMove = func(p store.TransitionParams) bool {
				return p.From == store.StateCalling && len(p.Records) > 0 && p.Records[0].Step == StepReplaceLive
			}
			e.first = e.run(cmd)
			e.failMove = nil
			return cmd
		},
		want:  "converged",
		trace: trace("result replace-live lost/no-result-recorded", "resolve replace-live ours", "complete converged"),
		check: func(t *testing.T, e *env, _ outcome) {
			require.Equal(t, "uncertain/interrupted", e.first.word())
			require.Equal(t, store.StateCalling, e.first.res.Run.Op.State)
			requireLive(t, e, "2", "password", "new")
			requireWrites(t, e, nil) // the rerun writes nothing
		},
	}, {
		name: "409 from someone else's write: theirs, the archive stays",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) { s.Data["password"] = []byte("theirs") })
			}))
			return cmd
		},
		want:  "refused/changed-concurrently",
		trace: trace("result replace-live unknown/conflict", "resolve replace-live theirs/changed-concurrently", "refuse changed-concurrently"),
		check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "1", "password", "theirs")
			requireWrites(t, e, map[string]int{snapName(1): 1})
		},
	}, {
		name: "someone else writes version 2 with other data: theirs",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) {
					s.Annotations[AnnotationVersion] = "2"
					s.Data["password"] = []byte("theirs")
				})
			}))
			return cmd
		},
		want:  "refused/changed-concurrently",
		trace: trace("result replace-live unknown/conflict", "resolve replace-live theirs/changed-concurrently", "refuse changed-concurrently"),
		check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "2", "password", "theirs")
		},
	}, {
		name:  "404: someone deleted it",
		setup: scripted(seedV1, kubetest.Update, testName, kubetest.Theirs(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, testName) })),
		want:  "refused/secret-absent",
		trace: trace("result replace-live unknown/not-found", "resolve replace-live theirs/secret-absent", "refuse secret-absent"),
		check: func(t *testing.T, e *env, _ outcome) {
			require.Nil(t, e.live())
			requireWrites(t, e, map[string]int{snapName(1): 1})
		},
	}, {
		name: "recreated under the same name: the UID precondition fails, uid-changed",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				d.Remove(kubetest.Secrets, testName)
				d.SeedSecret(&corev1.Secret{ObjectMeta: objectMeta(testName), Data: kubetest.Data("password", "other")})
			}))
			return cmd
		},
		want:  "refused/uid-changed",
		trace: trace("result replace-live unknown/conflict", "resolve replace-live theirs/uid-changed", "refuse uid-changed"),
		check: func(t *testing.T, e *env, _ outcome) {
			require.Equal(t, kubetest.Data("password", "other"), e.live().Data)
			requireWrites(t, e, map[string]int{snapName(1): 1})
		},
	}, {
		name:  "422 is a refusal",
		setup: scripted(seedV1, kubetest.Update, testName, kubetest.Status(kubetest.Invalid("Secret", testName))),
		want:  "refused/invalid",
		trace: trace("result replace-live rejected/invalid", "refuse invalid"),
		check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "1", "password", "old")
		},
	}, {
		name: "the archive deleted by someone before the live write: archive-missing",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, snapName(1)) }))
			}))
			return cmd
		},
		want:  "refused/archive-missing",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "refuse archive-missing"},
		check: func(t *testing.T, e *env, _ outcome) {
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
	runRows(t, []famRow{{
		name: "applied",
		setup: func(e *env) *Command {
			restoreSetup(e)
			return e.restore(e.rv(), 1)
		},
		want: "completed",
		trace: []string{"call create-snapshot v3", "result create-snapshot v3 applied", "call replace-live", "result replace-live applied",
			"complete completed"},
		check: restored,
	}, {
		name: "lost after apply: ours",
		setup: func(e *env) *Command {
			restoreSetup(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.AppliedLost())
			return e.restore(e.rv(), 1)
		},
		want: "converged",
		trace: []string{"call create-snapshot v3", "result create-snapshot v3 applied", "call replace-live", "result replace-live unknown/lost",
			"resolve replace-live ours", "complete converged"},
		check: restored,
	}, {
		name: "lost before apply: sent again with the target's data",
		setup: func(e *env) *Command {
			restoreSetup(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.LostBefore())
			return e.restore(e.rv(), 1)
		},
		want: "completed",
		trace: []string{"call create-snapshot v3", "result create-snapshot v3 applied", "call replace-live", "result replace-live unknown/lost",
			"resolve replace-live not-applied/resource-version-unchanged", "call replace-live", "result replace-live applied", "complete completed"},
		check: restored,
	}, {
		name: "the target deleted by someone before the resolution: theirs",
		setup: func(e *env) *Command {
			restoreSetup(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.LostBefore().First(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, snapName(1)) }))
			return e.restore(e.rv(), 1)
		},
		want: "refused/version-absent",
		trace: []string{"call create-snapshot v3", "result create-snapshot v3 applied", "call replace-live", "result replace-live unknown/lost",
			"resolve replace-live theirs/version-absent", "refuse version-absent"},
		check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "3", "password", "v3")
		},
	}, {
		name: "a version at the counter: version-ahead",
		setup: func(e *env) *Command {
			restoreSetup(e)
			return e.restore(e.rv(), 3)
		},
		want:  "refused/version-ahead",
		trace: []string{"refuse version-ahead"},
		check: func(t *testing.T, e *env, _ outcome) {
			require.Zero(t, e.api.Calls(kubetest.List)+e.api.Calls(kubetest.Create))
			requireWrites(t, e, nil)
		},
	}, {
		name: "a version above the counter: version-ahead",
		setup: func(e *env) *Command {
			restoreSetup(e)
			return e.restore(e.rv(), 9)
		},
		want:  "refused/version-ahead",
		trace: []string{"refuse version-ahead"},
		check: func(t *testing.T, e *env, _ outcome) { requireWrites(t, e, nil) },
	}, {
		name: "a planted look-alike target: foreign-snapshot, never read",
		setup: func(e *env) *Command {
			live := e.seedLive("5", "password", "v5")
			e.plant(live, 3)
			return e.restore(e.rv(), 3)
		},
		want:  "refused/foreign-snapshot",
		trace: []string{"refuse foreign-snapshot"},
		check: func(t *testing.T, e *env, _ outcome) {
			require.Zero(t, e.api.Count(kubetest.Get, kubetest.Secrets, SnapshotName("uid-0001", 3)), "its data is never read")
			requireWrites(t, e, nil)
		},
	}, {
		name: "an absent version: version-absent",
		setup: func(e *env) *Command {
			e.seedLive("5", "password", "v5")
			return e.restore(e.rv(), 3)
		},
		want:  "refused/version-absent",
		trace: []string{"refuse version-absent"},
		check: func(t *testing.T, e *env, _ outcome) { requireWrites(t, e, nil) },
	}, {
		name: "a restore onto an immutable Secret holding the target's data: existing",
		setup: func(e *env) *Command {
			restoreSetup(e)
			edit(e.api.Server, testName, func(s *corev1.Secret) {
				immutable := true
				s.Immutable, s.Data = &immutable, kubetest.Data("password", "v1")
			})
			return e.restore(e.rv(), 1)
		},
		want:  "existing",
		trace: []string{"complete existing"},
		check: func(t *testing.T, e *env, _ outcome) { requireWrites(t, e, nil) },
	}})
}

func TestFamilyGuards(t *testing.T) {
	t.Parallel()
	none := func(t *testing.T, e *env, _ outcome) { requireWrites(t, e, nil) }
	runRows(t, []famRow{{
		name: "counter-behind: keyledger's own history above the live counter",
		setup: func(e *env) *Command {
			e.history(2) // v1, v2; live at 3
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Annotations[AnnotationVersion] = "1" })
			return e.update(e.rv(), "password", "x")
		},
		want:  "refused/counter-behind",
		trace: []string{"refuse counter-behind"},
		check: func(t *testing.T, e *env, o outcome) {
			require.InDelta(t, 2, o.ending()["newestVersion"], 0)
			none(t, e, o)
		},
	}, {
		name: "counter-behind: an unsettled snapshot of ours above the counter",
		setup: func(e *env) *Command {
			e.seedLive("2", "password", "v2")
			first := e.update(e.rv(), "password", "v3")
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(2), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Status(kubetest.ServerError()))
			}))
			e.first = e.run(first) // snapshot v2 made, its answer lost: unsettled
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Annotations[AnnotationVersion] = "1" })
			return e.update(e.rv(), "password", "x")
		},
		want:  "refused/counter-behind",
		trace: []string{"refuse counter-behind"},
		check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "uncertain/read-failed", e.first.word())
			require.InDelta(t, 2, o.ending()["newestVersion"], 0)
			require.NotNil(t, e.snap("uid-0001", 2), "left alone")
			none(t, e, o)
		},
	}, {
		name: "a stale expectedResourceVersion: refused before any write",
		setup: func(e *env) *Command {
			e.seedLive("1", "password", "v1")
			return e.update("999", "password", "x")
		},
		want:  "refused/stale-resource-version",
		trace: []string{"refuse stale-resource-version"},
		check: none,
	}, {
		name: "the size guard: invalid before the journal is opened",
		setup: func(e *env) *Command {
			e.seedLive("1", "password", "v1")
			return e.update(e.rv(), "big", strings.Repeat("x", MaxSecretBytes))
		},
		want: "invalid",
		check: func(t *testing.T, e *env, o outcome) {
			require.Empty(t, o.records, "nothing journaled")
			_, err := e.j.Load(context.Background(), o.mutationID)
			require.ErrorIs(t, err, store.ErrNotFound, "nothing journaled")
			none(t, e, o)
		},
	}, {
		name: "a service-account token is never versioned",
		setup: func(e *env) *Command {
			e.seedLive("1", "token", "t")
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Type = corev1.SecretTypeServiceAccountToken })
			return e.update(e.rv(), "token", "x")
		},
		want:  "refused/service-account-token",
		trace: []string{"refuse service-account-token"},
		check: none,
	}, {
		name: "a malformed counter",
		setup: func(e *env) *Command {
			e.seedLive("07", "a", "1")
			return e.update(e.rv(), "a", "2")
		},
		want:  "refused/version-malformed",
		trace: []string{"refuse version-malformed"},
		check: none,
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
	runRows(t, []famRow{{
		name: "a completed update",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.first = e.run(cmd)
			return cmd
		},
		want:  "replayed existing",
		trace: traceUpdate,
		check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "completed", e.first.word())
			listed(0)(t, e, o)
		},
	}, {
		name: "a completed update, the live Secret changed since: still a replay",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.first = e.run(cmd)
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Data["password"] = []byte("later") })
			return cmd
		},
		want:  "replayed existing",
		trace: traceUpdate,
		check: listed(0),
	}, {
		name: "a refused restore",
		setup: func(e *env) *Command {
			restoreSetup(e)
			cmd := e.restore(e.rv(), 7)
			e.first = e.run(cmd)
			return cmd
		},
		want:  "replayed refused/version-ahead",
		trace: []string{"refuse version-ahead"},
		check: replayed,
	}, {
		name: "a completed delete",
		setup: func(e *env) *Command {
			cmd := purgeSetup(e)
			e.first = e.run(cmd)
			return cmd
		},
		want:  "replayed existing",
		check: listed(1),
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
	runRows(t, []famRow{{
		name:  "an update of an absent Secret: secret-absent",
		setup: func(e *env) *Command { return e.update("7", "a", "1") },
		want:  "refused/secret-absent",
		trace: []string{"refuse secret-absent"},
		check: none,
	}, {
		name: "removing a key the Secret does not hold: key-absent",
		setup: func(e *env) *Command {
			e.seedLive("1", "a", "1")
			c := e.update(e.rv())
			c.RemoveKeys = []string{"b"}
			return c
		},
		want:  "refused/key-absent",
		trace: []string{"refuse key-absent"},
		check: none,
	}, {
		name: "removing a key: archived, then written without it",
		setup: func(e *env) *Command {
			e.seedLive("1", "a", "1", "b", "2")
			c := e.update(e.rv())
			c.RemoveKeys = []string{"b"}
			return c
		},
		want:  "completed",
		trace: traceUpdate,
		check: func(t *testing.T, e *env, _ outcome) {
			requireLive(t, e, "2", "a", "1")
			require.Equal(t, kubetest.Data("a", "1", "b", "2"), e.snap("uid-0001", 1).Data)
		},
	}, {
		name: "removing a key of a Secret over the limit: invalid before the journal",
		setup: func(e *env) *Command {
			e.seedLive("1", "a", "1", "big", big+"y")
			c := e.update(e.rv())
			c.RemoveKeys = []string{"a"}
			return c
		},
		want: "invalid",
		check: func(t *testing.T, e *env, o outcome) {
			_, err := e.j.Load(context.Background(), o.mutationID)
			require.ErrorIs(t, err, store.ErrNotFound, "nothing journaled")
			none(t, e, o)
		},
	}, {
		name:  "creating a Secret over the guard: invalid before the journal",
		setup: func(e *env) *Command { return e.update("", "big", big) },
		want:  "invalid",
		check: func(t *testing.T, e *env, o outcome) {
			_, err := e.j.Load(context.Background(), o.mutationID)
			require.ErrorIs(t, err, store.ErrNotFound, "nothing journaled")
			none(t, e, o)
		},
	}, {
		name: "an immutable Secret is never updated",
		setup: func(e *env) *Command {
			e.seedLive("1", "a", "1")
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Immutable = new(bool); *s.Immutable = true })
			return e.update(e.rv(), "a", "2")
		},
		want:  "refused/immutable",
		trace: []string{"refuse immutable"},
		check: none,
	}, {
		name: "a restore onto an immutable Secret with other data: immutable",
		setup: func(e *env) *Command {
			restoreSetup(e)
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Immutable = new(bool); *s.Immutable = true })
			return e.restore(e.rv(), 1)
		},
		want:  "refused/immutable",
		trace: []string{"refuse immutable"},
		check: none,
	}, {
		name: "a restore of data over the API server's limit: too-large",
		setup: func(e *env) *Command {
			e.seedLive("1", "a", "1", "big", big+"y")
			c := e.update(e.rv())
			c.RemoveKeys = []string{"big"}
			require.Equal(t, "completed", e.run(c).word())
			return e.restore(e.rv(), 1)
		},
		want:  "refused/too-large",
		trace: []string{"refuse too-large"},
		check: none,
	}, {
		name: "a terminating Secret is never written",
		setup: func(e *env) *Command {
			e.seedLive("1", "a", "1")
			edit(e.api.Server, testName, kubetest.BeingDeleted)
			return e.update(e.rv(), "a", "2")
		},
		want:  "refused/terminating",
		trace: []string{"refuse terminating"},
		check: none,
	}, {
		name:  "the history list fails before any call: unavailable, nothing journaled but the preparation",
		setup: scripted(seedV1, kubetest.List, "", kubetest.Status(kubetest.ServerError())),
		want:  "unavailable/kubernetes",
		trace: []string{},
		check: none,
	}, {
		name: "resume from answered after a recreate under the same name: uid-changed",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Status(kubetest.ServerError()))
			}))
			e.first = e.run(cmd)
			e.api.Remove(kubetest.Secrets, testName)
			e.seedLive("1", "password", "old")
			return cmd
		},
		want:  "refused/uid-changed",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "refuse uid-changed"},
		check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "uncertain/interrupted", e.first.word())
			require.Equal(t, store.StateAnswered, e.first.res.Run.Op.State)
			require.Equal(t, 2, o.observations(), "the new UID is journaled")
			require.Equal(t, "uid-0003", o.last(store.RecordObservation, StepReadLive).UID)
			none(t, e, o)
		},
	}, {
		name: "the archive gets a finalizer before the live write: snapshot-finalizers",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
					edit(d, snapName(1), kubetest.Held)
				}))
			}))
			return cmd
		},
		want:  "refused/snapshot-finalizers",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "refuse snapshot-finalizers"},
		check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		name: "the archive is being deleted before the live write: snapshot-terminating",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
					edit(d, snapName(1), kubetest.BeingDeleted)
				}))
			}))
			return cmd
		},
		want:  "refused/snapshot-terminating",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "refuse snapshot-terminating"},
		check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		name: "a rerun under a new mutationId of an applied update: existing, nothing written",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			require.Equal(t, "completed", e.run(cmd).word())
			return e.update(cmd.ExpectedResourceVersion, "password", "new")
		},
		want:  "existing",
		trace: []string{"complete existing"},
		check: none,
	}, {
		name: "a rerun under a new mutationId with other data: stale",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			require.Equal(t, "completed", e.run(cmd).word())
			return e.update(cmd.ExpectedResourceVersion, "password", "other")
		},
		want:  "refused/stale-resource-version",
		trace: []string{"refuse stale-resource-version"},
		check: none,
	}, {
		name: "a rerun under a new mutationId of an applied restore: existing",
		setup: func(e *env) *Command {
			restoreSetup(e)
			cmd := e.restore(e.rv(), 1)
			require.Equal(t, "completed", e.run(cmd).word())
			return e.restore(cmd.ExpectedResourceVersion, 1)
		},
		want:  "existing",
		trace: []string{"complete existing"},
		check: none,
	}, {
		name: "a stale delete: refused",
		setup: func(e *env) *Command {
			e.seedLive("3", "a", "1")
			return e.delete("999", true)
		},
		want:  "refused/stale-resource-version",
		trace: []string{"refuse stale-resource-version"},
		check: none,
	}, {
		name: "a mutating admission changes the created Secret: result-mismatch, theirs",
		setup: func(e *env) *Command {
			e.api.On(kubetest.Create, kubetest.Secrets, testName, kubetest.Admission(kubetest.OnSecret(func(s *corev1.Secret) { s.Data["injected"] = []byte("x") })).Always())
			return e.update("", "a", "1")
		},
		want:  "refused/already-exists",
		trace: []string{"call create-live", "result create-live unknown/result-mismatch", "resolve create-live theirs/already-exists", "refuse already-exists"},
		check: func(t *testing.T, e *env, _ outcome) { require.Equal(t, 1, e.api.Writes(kubetest.Secrets, testName)) },
	}, {
		name: "a mutating admission changes the snapshot: result-mismatch, source-conflict",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.Admission(kubetest.OnSecret(func(s *corev1.Secret) { s.Data["injected"] = []byte("x") })).Always())
			return cmd
		},
		want: "refused/source-conflict",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/result-mismatch", "resolve create-snapshot v1 theirs/source-conflict",
			"refuse source-conflict"},
		check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		name: "a mutating admission changes the live write: result-mismatch, theirs",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.Admission(kubetest.OnSecret(func(s *corev1.Secret) { s.Data["injected"] = []byte("x") })).Always())
			return cmd
		},
		want: "refused/changed-concurrently",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live unknown/result-mismatch",
			"resolve replace-live theirs/changed-concurrently", "refuse changed-concurrently"},
		check: func(t *testing.T, e *env, _ outcome) { require.Equal(t, 1, e.api.Writes(kubetest.Secrets, testName)) },
	}})
}

func TestFamilyResolutions(t *testing.T) {
	t.Parallel()
	runRows(t, []famRow{{
		name: "the snapshot's re-read fails: undetermined",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			lostAndUnread(e, kubetest.Create, snapName(1), snapName(1))
			return cmd
		},
		want:  "uncertain/read-failed",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 undetermined/read-failed"},
		check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		name: "the live Secret changed before the snapshot's resolution: changed-concurrently",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				edit(d, testName, func(s *corev1.Secret) { s.Data["password"] = []byte("theirs") })
			}))
			return cmd
		},
		want: "refused/changed-concurrently",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 theirs/changed-concurrently",
			"refuse changed-concurrently"},
		check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "theirs") },
	}, {
		name: "the occupant carries our nonce but other data: source-conflict",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
					edit(d, snapName(1), func(s *corev1.Secret) { s.Data["password"] = []byte("copied-nonce") })
				}))
			}))
			return cmd
		},
		want: "refused/source-conflict",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 theirs/source-conflict",
			"refuse source-conflict"},
		check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		name: "our occupant is being deleted: snapshot-terminating",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
					edit(d, snapName(1), kubetest.BeingDeleted)
				}))
			}))
			return cmd
		},
		want: "refused/snapshot-terminating",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 theirs/snapshot-terminating",
			"refuse snapshot-terminating"},
		check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		name: "our occupant holds a finalizer: snapshot-finalizers",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			e.api.On(kubetest.Create, kubetest.Secrets, snapName(1), kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
					edit(d, snapName(1), kubetest.Held)
				}))
			}))
			return cmd
		},
		want: "refused/snapshot-finalizers",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 unknown/lost", "resolve create-snapshot v1 theirs/snapshot-finalizers",
			"refuse snapshot-finalizers"},
		check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "1", "password", "old") },
	}, {
		// Our live write landed, but the archive it stood on is gone: it
		// cannot be proven ours, so it is reported as someone else's.
		name:  "the live write landed but its archive vanished before the re-read: changed-concurrently",
		setup: scripted(seedV1, kubetest.Update, testName, kubetest.AppliedLost().First(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, snapName(1)) })),
		want:  "refused/changed-concurrently",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live unknown/lost",
			"resolve replace-live theirs/changed-concurrently", "refuse changed-concurrently"},
		check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "2", "password", "new") },
	}, {
		name: "the archive's re-read fails while resolving the live write: undetermined",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			lostAndUnread(e, kubetest.Update, testName, snapName(1))
			return cmd
		},
		want: "uncertain/read-failed",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live unknown/lost",
			"resolve replace-live undetermined/read-failed"},
		check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "2", "password", "new") },
	}, {
		name: "a look-alike replaced the archive before the live write's re-read: changed-concurrently",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			live := e.live()
			e.api.On(kubetest.Update, kubetest.Secrets, testName, kubetest.AppliedLost().First(func(d *kubetest.Server) {
				d.Remove(kubetest.Secrets, snapName(1))
				d.SeedSecret(lookalike(live, 1))
			}))
			return cmd
		},
		want: "refused/changed-concurrently",
		trace: []string{"call create-snapshot v1", "result create-snapshot v1 applied", "call replace-live", "result replace-live unknown/lost",
			"resolve replace-live theirs/changed-concurrently", "refuse changed-concurrently"},
		check: func(t *testing.T, e *env, _ outcome) { requireLive(t, e, "2", "password", "new") },
	}, {
		name: "the live delete's re-read fails: undetermined",
		setup: func(e *env) *Command {
			e.seedLive("1", "a", "1")
			lostAndUnread(e, kubetest.Delete, testName, testName)
			return e.delete(e.rv(), true)
		},
		want:  "uncertain/read-failed",
		trace: []string{"call delete-live", "result delete-live unknown/lost", "resolve delete-live undetermined/read-failed"},
		check: func(t *testing.T, e *env, _ outcome) { require.Nil(t, e.live()) },
	}, {
		name: "the live delete lost, finalizers hold it: ours pending, then pending",
		setup: func(e *env) *Command {
			e.api.SeedSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: testName, Finalizers: []string{"example.com/hold"}}, Data: kubetest.Data("a", "1")})
			e.api.On(kubetest.Delete, kubetest.Secrets, testName, kubetest.AppliedLost())
			return e.delete(e.rv(), true)
		},
		want:  "pending",
		trace: []string{"call delete-live", "result delete-live unknown/lost", "resolve delete-live ours", "complete pending"},
		check: func(t *testing.T, e *env, o outcome) {
			require.Equal(t, "pending", workflowtest.Fields(o.last(store.RecordResolution, StepDeleteLive).Detail)["deletion"])
		},
	}, {
		name: "the delete answered, yet the same object is there unchanged: result-mismatch",
		setup: func(e *env) *Command {
			live := e.seedLive("1", "a", "1")
			e.api.On(kubetest.Delete, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) {
				d.On(kubetest.Get, kubetest.Secrets, testName, kubetest.Theirs(func(d *kubetest.Server) { d.Put(kubetest.Secrets, live) }))
			}))
			return e.delete(e.rv(), true)
		},
		want:  "refused/result-mismatch",
		trace: []string{"call delete-live", "result delete-live applied", "refuse result-mismatch"},
		check: func(t *testing.T, e *env, _ outcome) { require.NotNil(t, e.live()) },
	}, {
		name: "a snapshot delete's re-read fails: undetermined",
		setup: func(e *env) *Command {
			cmd := purgeSetup(e)
			lostAndUnread(e, kubetest.Delete, snapName(1), snapName(1))
			return cmd
		},
		want:  "uncertain/read-failed",
		trace: []string{"call delete-snapshot v1", "result delete-snapshot v1 unknown/lost", "resolve delete-snapshot v1 undetermined/read-failed"},
		check: func(t *testing.T, e *env, _ outcome) { require.NotNil(t, e.live()) },
	}})
}

func TestFamilyRestoreTarget(t *testing.T) {
	t.Parallel()
	none := func(t *testing.T, e *env, _ outcome) { requireWrites(t, e, nil) }
	runRows(t, []famRow{{
		name: "the target is being deleted: snapshot-invalid",
		setup: func(e *env) *Command {
			restoreSetup(e)
			edit(e.api.Server, snapName(1), kubetest.BeingDeleted)
			return e.restore(e.rv(), 1)
		},
		want:  "refused/snapshot-invalid",
		trace: []string{"refuse snapshot-invalid"},
		check: none,
	}, {
		name: "the target was taken from another type of Secret: snapshot-invalid",
		setup: func(e *env) *Command {
			restoreSetup(e)
			edit(e.api.Server, testName, func(s *corev1.Secret) { s.Type = "example.com/other" })
			return e.restore(e.rv(), 1)
		},
		want:  "refused/snapshot-invalid",
		trace: []string{"refuse snapshot-invalid"},
		check: none,
	}, {
		name: "the target deleted between the list and its read: version-absent",
		setup: func(e *env) *Command {
			restoreSetup(e)
			e.api.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) { d.Remove(kubetest.Secrets, snapName(1)) }))
			return e.restore(e.rv(), 1)
		},
		want:  "refused/version-absent",
		trace: []string{"refuse version-absent"},
		check: none,
	}, {
		name: "the target's metadata edited between the list and its read: snapshot-invalid",
		setup: func(e *env) *Command {
			restoreSetup(e)
			e.api.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Theirs(func(d *kubetest.Server) {
				edit(d, snapName(1), func(s *corev1.Secret) { s.Annotations["extra"] = "x" })
			}))
			return e.restore(e.rv(), 1)
		},
		want:  "refused/snapshot-invalid",
		trace: []string{"refuse snapshot-invalid"},
		check: none,
	}, {
		name: "the target's read fails: unavailable, nothing sent",
		setup: func(e *env) *Command {
			restoreSetup(e)
			e.api.On(kubetest.Get, kubetest.Secrets, snapName(1), kubetest.Status(kubetest.ServerError()))
			return e.restore(e.rv(), 1)
		},
		want:  "unavailable/kubernetes",
		trace: []string{},
		check: none,
	}, {
		name: "a rerun under a new mutationId after the target vanished: stale, not existing",
		setup: func(e *env) *Command {
			restoreSetup(e)
			cmd := e.restore(e.rv(), 1)
			require.Equal(t, "completed", e.run(cmd).word())
			e.api.Remove(kubetest.Secrets, snapName(1))
			return e.restore(cmd.ExpectedResourceVersion, 1)
		},
		want:  "refused/stale-resource-version",
		trace: []string{"refuse stale-resource-version"},
		check: none,
	}, {
		name: "a rerun under a new mutationId whose archive is not the expected state: stale",
		setup: func(e *env) *Command {
			cmd := seedV1(e)
			require.Equal(t, "completed", e.run(cmd).word())
			return e.update("999", "password", "new")
		},
		want:  "refused/stale-resource-version",
		trace: []string{"refuse stale-resource-version"},
		check: none,
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
		Target: "secret/" + snapName(1), UID: "uid-0001", ResourceVersion: e.rv()})
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
// included: every decision reads the live Secret and lists the history
// afresh (nothing is carried from one decision to the next), the precheck
// reads the live Secret once more for itself.
func TestFamilyReadsPerDecision(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd := seedV1(e)
	require.Equal(t, "completed", e.run(cmd).word())
	// One history listing per run: the precheck's GET serves decision 1
	// (archive: LIST); decision 2 (write) reads the live Secret and the
	// archive again (GET, GET), the listing it reuses.
	require.Equal(t, map[kubetest.Verb]int{kubetest.Get: 3, kubetest.List: 1, kubetest.Create: 1, kubetest.Update: 1}, e.api.VerbCounts())

	e = newEnv(t)
	cmd = twoVersions(e)
	e.api.ResetCounts()
	require.Equal(t, "completed", e.run(cmd).word())
	// precheck GET; archive: LIST; prune: the run's reads, with the
	// archive's create answer folded in; write: GET live, GET archive.
	require.Equal(t, map[kubetest.Verb]int{kubetest.Get: 3, kubetest.List: 1, kubetest.Create: 1, kubetest.Delete: 1, kubetest.Update: 1}, e.api.VerbCounts())
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
			out = append(out, outcome{records: []store.Record{c}}.trace()...)
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
