package retire

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/kubetest"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/retire/keyring/keyringtest"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// scene is one scenario: the API double holding the keyring Secret, the
// in-memory journal, and the command retiring fxKey.
type scene struct {
	t       *testing.T
	api     *kubetest.Server
	journal *workflowtest.Journal
	cmd     *Command
	// before is the manifest the Secret held at the start; start the
	// Secret itself (nil when absent).
	before *keyring.Manifest
	start  *corev1.Secret
}

// newScene makes the double hold s (absent when nil) and a command for it.
func newScene(t *testing.T, m *keyring.Manifest, s *corev1.Secret, spec ...func(*Spec)) *scene {
	sc := &scene{t: t, journal: workflowtest.NewJournal(), before: m}
	if s == nil {
		sc.api = newAPI(keyringSecret(m))
		theirDelete(sc.api)
		sc.cmd = retirement("uid-0001", spec...)
		return sc
	}
	sc.api = newAPI(s)
	sc.start = now(sc.api)
	sc.cmd = retirement(string(sc.start.UID), spec...)
	return sc
}

// run runs the command once, on the journal j (the scene's when nil).
func (sc *scene) run(j workflow.Store) (*workflow.Result, error) {
	if j == nil {
		j = sc.journal
	}
	return workflow.Operate(context.Background(), j, sc.plan(), nil)
}

// plan is the command's plan with the double as its API server.
func (sc *scene) plan() workflow.Plan {
	return workflow.Plan{Prepare: preparation(sc.cmd), Family: &family{cmd: sc.cmd, secret: keyringAPI{sc.api, fxSecret}}}
}

// operation is the journaled operation and its records.
func (sc *scene) operation() (*store.Operation, []store.Record) {
	sc.t.Helper()
	op, records, err := sc.journal.Snapshot(context.Background(), fxMutation)
	require.NoError(sc.t, err)
	return op, records
}

// crashingJournal dies once, right before committing the first transition
// crash matches: the process ending between two journal moves. The
// transition is not committed.
type crashingJournal struct {
	workflow.Store
	crash   func(p store.TransitionParams) bool
	crashed bool
}

var errCrash = errors.New("process ended before the journal commit")

func (c *crashingJournal) Transition(ctx context.Context, p store.TransitionParams) (*store.Operation, error) {
	if !c.crashed && c.crash(p) {
		c.crashed = true
		return nil, errCrash
	}
	return c.Store.Transition(ctx, p)
}

// leaving matches the first transition out of state st.
func leaving(st store.State) func(p store.TransitionParams) bool {
	return func(p store.TransitionParams) bool { return p.From == st }
}

// runWant is what one run of the command ends with, in
// workflowtest.Ending's spelling.
type runWant = string

func completed() runWant   { return string(workflow.OutcomeCompleted) }
func converged() runWant   { return string(workflow.OutcomeConverged) }
func existing() runWant    { return string(workflow.OutcomeExisting) }
func unavailable() runWant { return "unavailable/kubernetes" }
func replayed(w runWant) runWant {
	if w == completed() || w == converged() {
		w = existing()
	}
	return "replayed " + w
}
func refused(reason string) runWant   { return "refused/" + reason }
func uncertain(reason string) runWant { return "uncertain/" + reason }

// The Secret at the end of a scenario.
type ending int

const (
	// unchanged: the Secret is exactly as the scenario started.
	unchanged ending = iota
	// retired: the Secret holds this operation's retirement.
	retired
	// absent: the Secret does not exist.
	absent
	// theirs: someone else's version, without this operation's receipt.
	theirsOnly
)

// row is one scenario of the retirement table.
type row struct {
	name string
	// manifest is what the Secret holds (standardKeyring when nil);
	// secret changes the Secret; missing starts without it.
	manifest func(t testing.TB) *keyring.Manifest
	secret   []secretOption
	missing  bool
	spec     func(*Spec)
	// script scripts the double's calls; with, when set, scripts them
	// with the whole scene at hand (another run of the command).
	script func(d *kubetest.Server)
	with   func(sc *scene)
	// crash, when set, ends the first run right before the matching
	// journal commit; the following runs use the journal as it was left.
	crash func(p store.TransitionParams) bool
	// runs is what each run of the same command ends with, in order.
	runs []runWant

	// After the last run: the Secret, the writes this operation's
	// Replace stored, the calls the double received, the journal.
	end            ending
	writes         int
	gets, replaces int
	trail          []string
}

var (
	begun    = []string{"preparation", "observation", "call 1"}
	appliedT = []string{"result applied", "completion completed"}
)

func join(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// retireRows: the one call kind (replace-keyring) under every answer, with
// someone else's writes, resumes from each state a crash can leave, and
// replays.
func retireRows(t testing.TB) []row {
	return []row{
		{
			name: "applied", runs: []runWant{completed()},
			end: retired, writes: 1, gets: 1, replaces: 1,
			trail: join(begun, appliedT),
		},
		{
			name:   "lost-after-apply: resolution finds our receipt",
			script: func(d *kubetest.Server) { onReplace(d, kubetest.AppliedLost()) },
			runs:   []runWant{converged()},
			end:    retired, writes: 1, gets: 2, replaces: 1,
			trail: join(begun, []string{"result unknown lost", "resolution ours", "completion converged"}),
		},
		{
			name:   "lost-before-apply: unchanged resourceVersion, sent again",
			script: func(d *kubetest.Server) { onReplace(d, kubetest.LostBefore()) },
			runs:   []runWant{completed()},
			end:    retired, writes: 1, gets: 2, replaces: 2,
			trail: join(begun, []string{"result unknown lost", "resolution not-applied resource-version-unchanged", "call 2"}, appliedT),
		},
		{
			name:   "500 not applied: sent again",
			script: func(d *kubetest.Server) { onReplace(d, serverError) },
			runs:   []runWant{completed()},
			end:    retired, writes: 1, gets: 2, replaces: 2,
			trail: join(begun, []string{"result unknown server-error", "resolution not-applied resource-version-unchanged", "call 2"}, appliedT),
		},
		{
			name:   "409: someone else replaced the Secret",
			script: func(d *kubetest.Server) { onReplace(d, kubetest.Theirs(annotate)) },
			runs:   []runWant{refused(ReasonChangedConcurrent)},
			end:    theirsOnly, gets: 2, replaces: 1,
			trail: join(begun, []string{"result unknown conflict", "resolution theirs changed-concurrently", "refusal changed-concurrently"}),
		},
		{
			name: "409: someone else retired the key with another receipt",
			script: func(d *kubetest.Server) {
				onReplace(d, kubetest.Theirs(func(d *kubetest.Server) {
					theirUpdate(d, holding(retiredBy(t, standardKeyring(), "mut-other", fxKey)))
				}))
			},
			runs: []runWant{refused(ReasonReceiptConflict)},
			end:  theirsOnly, gets: 2, replaces: 1,
			trail: join(begun, []string{"result unknown conflict", "resolution theirs receipt-conflict", "refusal receipt-conflict"}),
		},
		{
			name:   "409 with no change found: sent again",
			script: func(d *kubetest.Server) { onReplace(d, conflict) },
			runs:   []runWant{completed()},
			end:    retired, writes: 1, gets: 2, replaces: 2,
			trail: join(begun, []string{"result unknown conflict", "resolution not-applied resource-version-unchanged", "call 2"}, appliedT),
		},
		{
			name:   "404 on replace and on resolve: someone else deleted the Secret",
			script: func(d *kubetest.Server) { onReplace(d, kubetest.Theirs(theirDelete)) },
			runs:   []runWant{refused(ReasonSecretAbsent)},
			end:    absent, gets: 2, replaces: 1,
			trail: join(begun, []string{"result unknown not-found", "resolution theirs secret-absent", "refusal secret-absent"}),
		},
		{
			name: "lost-after-apply, then deleted: 404 on resolve",
			script: func(d *kubetest.Server) {
				onReplace(d, kubetest.AppliedLost())
				onGet(d, kubetest.Pass(), kubetest.Theirs(theirDelete))
			},
			runs: []runWant{refused(ReasonSecretAbsent)},
			end:  absent, writes: 1, gets: 2, replaces: 1,
			trail: join(begun, []string{"result unknown lost", "resolution theirs secret-absent", "refusal secret-absent"}),
		},
		{
			name: "lost-after-apply, then edited by someone else: our receipt stays ours",
			script: func(d *kubetest.Server) {
				onReplace(d, kubetest.AppliedLost())
				onGet(d, kubetest.Pass(), kubetest.Theirs(annotate))
			},
			runs: []runWant{converged()},
			end:  retired, writes: 1, gets: 2, replaces: 1,
			trail: join(begun, []string{"result unknown lost", "resolution ours", "completion converged"}),
		},
		{
			name: "lost-after-apply, then re-created by someone else: uid-changed on resolve",
			script: func(d *kubetest.Server) {
				onReplace(d, kubetest.AppliedLost())
				onGet(d, kubetest.Pass(), kubetest.Theirs(func(d *kubetest.Server) {
					theirDelete(d)
					d.Seed(kubetest.Secrets, keyringSecret(standardKeyring()))
				}))
			},
			runs: []runWant{refused(ReasonUIDChanged)},
			end:  theirsOnly, writes: 1, gets: 2, replaces: 1,
			trail: join(begun, []string{"result unknown lost", "resolution theirs uid-changed", "refusal uid-changed"}),
		},
		{
			name: "lost-before-apply, then someone else's write: changed-concurrently",
			script: func(d *kubetest.Server) {
				onReplace(d, kubetest.LostBefore())
				onGet(d, kubetest.Pass(), kubetest.Theirs(annotate))
			},
			runs: []runWant{refused(ReasonChangedConcurrent)},
			end:  theirsOnly, gets: 2, replaces: 1,
			trail: join(begun, []string{"result unknown lost", "resolution theirs changed-concurrently", "refusal changed-concurrently"}),
		},
		{
			name: "a concurrent run of the same command wins the race: written once",
			with: func(sc *scene) {
				onReplace(sc.api, kubetest.Theirs(func(*kubetest.Server) {
					// The other process, start to end, while this one's
					// replace is in flight.
					res, err := sc.run(nil)
					require.NoError(sc.t, err)
					require.Equal(sc.t, workflow.OutcomeCompleted, res.Outcome)
				}))
			},
			runs: []runWant{completed()},
			end:  retired, writes: 1, gets: 3, replaces: 2, // the third get confirms the completion the other process journaled
			trail: join(begun, []string{"result lost no-result-recorded", "resolution not-applied resource-version-unchanged", "call 2"}, appliedT),
		},
		{
			name:   "403: rejected, nothing written",
			script: func(d *kubetest.Server) { onReplace(d, forbidden) },
			runs:   []runWant{refused("forbidden")},
			end:    unchanged, gets: 1, replaces: 1,
			trail: join(begun, []string{"result rejected forbidden", "refusal forbidden"}),
		},
		{
			name:   "422: rejected, nothing written",
			script: func(d *kubetest.Server) { onReplace(d, invalid) },
			runs:   []runWant{refused("invalid")},
			end:    unchanged, gets: 1, replaces: 1,
			trail: join(begun, []string{"result rejected invalid", "refusal invalid"}),
		},
		{
			name: "result-mismatch: a stale object came back, settled by re-reading",
			script: func(d *kubetest.Server) {
				stale := now(d)
				onReplace(d, kubetest.Answer(kubetest.OnSecret(func(s *corev1.Secret) { *s = *stale })))
			},
			runs: []runWant{converged()},
			end:  retired, writes: 1, gets: 2, replaces: 1,
			trail: join(begun, []string{"result unknown result-mismatch", "resolution ours", "completion converged"}),
		},
		{
			name: "result-mismatch: an unreadable object came back, settled by re-reading",
			script: func(d *kubetest.Server) {
				onReplace(d, kubetest.Answer(kubetest.OnSecret(func(s *corev1.Secret) { s.Type = corev1.SecretTypeTLS })))
			},
			runs: []runWant{converged()},
			end:  retired, writes: 1, gets: 2, replaces: 1,
			trail: join(begun, []string{"result unknown result-mismatch", "resolution ours", "completion converged"}),
		},
		{
			name: "result-mismatch: the precondition's resourceVersion came back",
			script: func(d *kubetest.Server) {
				rv := now(d).ResourceVersion
				onReplace(d, kubetest.Answer(kubetest.OnSecret(func(s *corev1.Secret) { s.ResourceVersion = rv })))
			},
			runs: []runWant{converged()},
			end:  retired, writes: 1, gets: 2, replaces: 1,
			trail: join(begun, []string{"result unknown result-mismatch", "resolution ours", "completion converged"}),
		},
		{
			name: "result-mismatch: a webhook put the old keyring back, someone else's",
			script: func(d *kubetest.Server) {
				onReplace(d, kubetest.Admission(kubetest.OnSecret(func(s *corev1.Secret) {
					holding(standardKeyring())(s)
					s.Annotations["example.com/reverted"] = "yes"
				})))
			},
			runs: []runWant{refused(ReasonChangedConcurrent)},
			end:  theirsOnly, writes: 1, gets: 2, replaces: 1,
			trail: join(begun, []string{"result unknown result-mismatch", "resolution theirs changed-concurrently", "refusal changed-concurrently"}),
		},
		{
			name: "500 on the resolving read: uncertain, a rerun settles it",
			script: func(d *kubetest.Server) {
				onReplace(d, kubetest.AppliedLost())
				onGet(d, kubetest.Pass(), serverError)
			},
			runs: []runWant{uncertain("read-failed"), converged()},
			end:  retired, writes: 1, gets: 3, replaces: 1,
			trail: join(begun, []string{"result unknown lost", "resolution undetermined read-failed", "resolution ours", "completion converged"}),
		},
		{
			name: "lost three times: attempts exhausted, a rerun completes",
			script: func(d *kubetest.Server) {
				onReplace(d, kubetest.LostBefore(), kubetest.LostBefore(), kubetest.LostBefore())
			},
			runs: []runWant{uncertain("attempts-exhausted"), completed()},
			end:  retired, writes: 1, gets: 5, replaces: 4,
			trail: join(begun,
				[]string{"result unknown lost", "resolution not-applied resource-version-unchanged", "call 2"},
				[]string{"result unknown lost", "resolution not-applied resource-version-unchanged", "call 3"},
				[]string{"result unknown lost", "resolution not-applied resource-version-unchanged"},
				[]string{"resolution not-applied resource-version-unchanged", "call 4"}, appliedT),
		},
		{
			name:   "500 on the first read: unavailable before any call, a rerun completes",
			script: func(d *kubetest.Server) { onGet(d, serverError) },
			runs:   []runWant{unavailable(), completed()},
			end:    retired, writes: 1, gets: 2, replaces: 1,
			trail: join(begun, appliedT),
		},

		// Resumes: the first run ends right before a journal commit.
		{
			name: "resume from prepared", crash: leaving(store.StatePrepared),
			runs: []runWant{uncertain("interrupted"), completed()},
			end:  retired, writes: 1, gets: 2, replaces: 1,
			trail: join(begun, appliedT),
		},
		{
			name: "resume from calling, the write applied", crash: leaving(store.StateCalling),
			runs: []runWant{uncertain("interrupted"), converged()},
			end:  retired, writes: 1, gets: 2, replaces: 1,
			trail: join(begun, []string{"result lost no-result-recorded", "resolution ours", "completion converged"}),
		},
		{
			name: "resume from calling, the write not applied", crash: leaving(store.StateCalling),
			script: func(d *kubetest.Server) { onReplace(d, kubetest.LostBefore()) },
			runs:   []runWant{uncertain("interrupted"), completed()},
			end:    retired, writes: 1, gets: 2, replaces: 2,
			trail: join(begun, []string{"result lost no-result-recorded", "resolution not-applied resource-version-unchanged", "call 2"}, appliedT),
		},
		{
			name: "resume from calling, not applied and changed since", crash: leaving(store.StateCalling),
			script: func(d *kubetest.Server) {
				onReplace(d, kubetest.LostBefore())
				onGet(d, kubetest.Pass(), kubetest.Theirs(annotate))
			},
			runs: []runWant{uncertain("interrupted"), refused(ReasonChangedConcurrent)},
			end:  theirsOnly, gets: 2, replaces: 1,
			trail: join(begun, []string{"result lost no-result-recorded", "resolution theirs changed-concurrently", "refusal changed-concurrently"}),
		},
		{
			name: "resume from resolving, the write applied", crash: leaving(store.StateResolving),
			script: func(d *kubetest.Server) { onReplace(d, kubetest.AppliedLost()) },
			runs:   []runWant{uncertain("interrupted"), converged()},
			end:    retired, writes: 1, gets: 3, replaces: 1,
			trail: join(begun, []string{"result unknown lost", "resolution ours", "completion converged"}),
		},
		{
			name: "resume from resolving, the write not applied", crash: leaving(store.StateResolving),
			script: func(d *kubetest.Server) { onReplace(d, kubetest.LostBefore()) },
			runs:   []runWant{uncertain("interrupted"), completed()},
			end:    retired, writes: 1, gets: 3, replaces: 2,
			trail: join(begun, []string{"result unknown lost", "resolution not-applied resource-version-unchanged", "call 2"}, appliedT),
		},

		// Replays.
		{
			name: "replay of a completed operation: one read confirms it, nothing written",
			runs: []runWant{completed(), replayed(completed())},
			end:  retired, writes: 1, gets: 2, replaces: 1,
			trail: join(begun, appliedT),
		},
		{
			name:   "replay of a converged operation",
			script: func(d *kubetest.Server) { onReplace(d, kubetest.AppliedLost()) },
			runs:   []runWant{converged(), replayed(converged())},
			end:    retired, writes: 1, gets: 3, replaces: 1,
			trail: join(begun, []string{"result unknown lost", "resolution ours", "completion converged"}),
		},
		{
			name: "replay of a refused operation",
			spec: func(s *Spec) { s.KeyID = "k-2026-08" },
			runs: []runWant{refused(keyring.ReasonKeyActive), replayed(refused(keyring.ReasonKeyActive))},
			end:  unchanged, gets: 1,
			trail: []string{"preparation", "observation", "refusal key-active"},
		},
		{
			name: "our receipt already in place (the journal was lost): existing, nothing written",
			manifest: func(t testing.TB) *keyring.Manifest {
				return retiredBy(t, standardKeyring(), fxMutation, fxKey)
			},
			runs: []runWant{existing()},
			end:  unchanged, gets: 1,
			trail: []string{"preparation", "observation", "completion existing"},
		},
		{
			name: "someone else's receipt already in place: receipt-conflict",
			manifest: func(t testing.TB) *keyring.Manifest {
				return retiredBy(t, standardKeyring(), "mut-other", fxKey)
			},
			runs: []runWant{refused(ReasonReceiptConflict)},
			end:  unchanged, gets: 1,
			trail: []string{"preparation", "observation", "refusal receipt-conflict"},
		},
	}
}

// refusalRows: every refusal Decide reaches, before any call: each reason
// readKeyring gives (the Secret's shape, then the manifest's parse) and each
// the retirement itself gives. None sends a call or writes.
func refusalRows() []row {
	shape := []string{"preparation"}
	observed := []string{"preparation", "observation"}
	refusal := func(name, reason string, before []string, m func(testing.TB) *keyring.Manifest, spec func(*Spec), secret ...secretOption) row {
		return row{
			name: name + ": " + reason, manifest: m, spec: spec, secret: secret,
			runs: []runWant{refused(reason)}, end: unchanged, gets: 1,
			trail: join(before, []string{"refusal " + reason}),
		}
	}
	other := func(keyID string) func(*Spec) {
		return func(s *Spec) {
			s.KeyID, s.ExpectedMaterialDigest = keyID, keyring.MaterialDigest(keyringtest.Material(keyID))
		}
	}
	raw := func(data string) secretOption {
		return func(s *corev1.Secret) { s.Data[fxDataKey] = []byte(data) }
	}
	gone := func(n int) []keyringtest.Option {
		var opts []keyringtest.Option
		for i := range n {
			r := receiptBy("mut-old", "k-2020-"+string(rune('a'+i/26))+string(rune('a'+i%26)), int64(i+1))
			r.RetirementID = r.RetirementID + "-" + r.KeyID
			opts = append(opts, keyringtest.WithRetirement(r))
		}
		return opts
	}
	rows := []row{
		{
			name: "absent Secret: secret-absent", missing: true,
			runs: []runWant{refused(ReasonSecretAbsent)}, end: absent, gets: 1,
			trail: []string{"preparation", "refusal secret-absent"},
		},
		refusal("re-created Secret", ReasonUIDChanged, shape, nil, func(s *Spec) { s.ExpectedUID = "00000000-0000-4000-8000-00000000beef" }),
		refusal("deletion pending", ReasonTerminating, shape, nil, nil, func(s *corev1.Secret) {
			now := metav1.Unix(1_780_000_100, 0)
			s.DeletionTimestamp, s.Finalizers = &now, []string{"example.com/hold"}
		}),
		refusal("TLS Secret", ReasonWrongType, shape, nil, nil, func(s *corev1.Secret) { s.Type = corev1.SecretTypeTLS }),
		refusal("immutable Secret", ReasonImmutable, shape, nil, nil, func(s *corev1.Secret) {
			yes := true
			s.Immutable = &yes
		}),
		refusal("two data entries", ReasonDataEntries, shape, nil, nil, func(s *corev1.Secret) { s.Data["extra"] = []byte("x") }),
		refusal("no entry under dataKey", ReasonDataEntries, shape, nil, func(s *Spec) { s.DataKey = "other.json" }),
		refusal("no keyring label", ReasonNotManaged, shape, nil, nil, func(s *corev1.Secret) { delete(s.Labels, LabelKeyring) }),
		refusal("another keyring label value", ReasonNotManaged, shape, nil, nil, func(s *corev1.Secret) { s.Labels[LabelKeyring] = "adopted" }),
		refusal("kubectl apply copy", ReasonLastApplied, shape, nil, nil, func(s *corev1.Secret) {
			s.Annotations[annotationLastApplied] = "{}"
		}),
		refusal("generation annotation behind", ReasonCatalogDrifted, shape, nil, nil, func(s *corev1.Secret) {
			s.Annotations[AnnotationGeneration] = "3"
		}),
		refusal("catalog digest annotation stale", ReasonCatalogDrifted, shape, nil, nil, func(s *corev1.Secret) {
			s.Annotations[AnnotationCatalogDigest] = keyring.MaterialDigest([]byte("another catalog"))
		}),
		refusal("trailing newline", keyring.ReasonNonCanonical, shape, nil, nil, func(s *corev1.Secret) {
			s.Data[fxDataKey] = append(s.Data[fxDataKey], '\n')
		}),
		refusal("oversize manifest", keyring.ReasonTooLarge, shape, nil, nil, func(s *corev1.Secret) {
			s.Data[fxDataKey] = append(s.Data[fxDataKey], make([]byte, keyring.MaxManifestBytes)...)
		}),
		refusal("not JSON", keyring.ReasonMalformed, shape, nil, nil, raw("{")),
		refusal("another schema", keyring.ReasonUnsupportedSchema, shape, func(testing.TB) *keyring.Manifest {
			m := standardKeyring()
			m.Schema = "keyledger.dev/keyring/v0"
			return m
		}, nil),
		refusal("receipt for a present key", keyring.ReasonRetiredKeyPresent, shape, func(testing.TB) *keyring.Manifest {
			return keyringtest.New(append(standardOptions(), keyringtest.WithRetirement(receiptBy("mut-old", "k-2026-06", 4)))...)
		}, nil),

		// The rest of what keyring.Parse refuses, each once through Decide.
		refusal("seventeen keys", keyring.ReasonTooManyKeys, shape, manifestOf(func() []keyringtest.Option {
			var opts []keyringtest.Option
			for i := range keyring.MaxKeys + 1 {
				id := fmt.Sprintf("k-2025-%02d", i)
				opts = append(opts, keyringtest.WithKey(id, "2025-01-01T00:00:00Z", keyringtest.Material(id)))
			}
			return append(opts, keyringtest.WithActive("k-2025-00"))
		}()...), nil),
		refusal("sixty-five receipts", keyring.ReasonTooManyRetirements, shape, manifestOf(
			append(append(standardOptions(), gone(keyring.MaxRetirements+1)...), keyringtest.WithGeneration(keyring.MaxRetirements+1))...), nil),
		refusal("short material", keyring.ReasonInvalidField, shape, manifestOf(
			keyringtest.WithKey("k-2026-05", "2026-05-01T00:00:00Z", make([]byte, 16)), keyringtest.WithKey(fxKey, "2026-07-01T00:00:00Z", keyringtest.Material(fxKey)),
			keyringtest.WithActive("k-2026-05")), nil),
		refusal("one id twice", keyring.ReasonDuplicateKeyID, shape, manifestOf(
			keyringtest.WithKey(fxKey, "2026-07-01T00:00:00Z", keyringtest.Material(fxKey)),
			keyringtest.WithKey(fxKey, "2026-07-01T00:00:00Z", keyringtest.Material(fxKey)), keyringtest.WithActive(fxKey)), nil),
		refusal("active key unknown", keyring.ReasonUnknownActiveKey, shape, manifestOf(
			keyringtest.WithKey(fxKey, "2026-07-01T00:00:00Z", keyringtest.Material(fxKey)), keyringtest.WithActive("k-2099-01")), nil),
		refusal("two receipts for one key", keyring.ReasonDuplicateRetiredKey, shape, func(testing.TB) *keyring.Manifest {
			second := receiptBy("mut-old2", "k-2026-05", 4)
			return keyringtest.New(append(standardOptions(), keyringtest.WithRetirement(receiptBy("mut-old", "k-2026-05", 3)),
				keyringtest.WithRetirement(second))...)
		}, nil),
		refusal("two receipts, one retirementId", keyring.ReasonDuplicateRetirementID, shape, func(testing.TB) *keyring.Manifest {
			second := receiptBy("mut-old", "k-2026-04", 4)
			return keyringtest.New(append(standardOptions(), keyringtest.WithRetirement(receiptBy("mut-old", "k-2026-05", 3)),
				keyringtest.WithRetirement(second))...)
		}, nil),

		refusal("key not in the keyring", keyring.ReasonKeyAbsent, observed, nil, other("k-2025-01")),
		refusal("the active key", keyring.ReasonKeyActive, observed, nil, other("k-2026-08")),
		refusal("other material", keyring.ReasonMaterialDigestMismatch, observed, nil, func(s *Spec) {
			s.ExpectedMaterialDigest = keyring.MaterialDigest([]byte("something else"))
		}),
		refusal("retirementId already used", keyring.ReasonDuplicateRetirementID, observed, func(testing.TB) *keyring.Manifest {
			r := receiptBy("mut-old", "k-2026-05", 4)
			r.RetirementID = fxRetirement
			return keyringtest.New(append(standardOptions(), keyringtest.WithRetirement(r))...)
		}, nil),
		refusal("receipts full", keyring.ReasonTooManyRetirements, observed, func(testing.TB) *keyring.Manifest {
			return keyringtest.New(append(append(standardOptions(), gone(keyring.MaxRetirements)...),
				keyringtest.WithGeneration(keyring.MaxRetirements))...)
		}, nil),
		refusal("last generation", keyring.ReasonGenerationOverflow, observed, func(testing.TB) *keyring.Manifest {
			return keyringtest.New(append(standardOptions(), keyringtest.WithGeneration(math.MaxInt64))...)
		}, nil),
		// A receipt for the key is ours only with this operation's every
		// identity: one field off is someone else's.
		receiptOff("retirementId", func(r *keyring.Retirement) { r.RetirementID = "ret-8" }),
		receiptOff("mutationId", func(r *keyring.Retirement) { r.MutationID = "mut-8" }),
		receiptOff("requestId", func(r *keyring.Retirement) { r.RequestID = "req-8" }),
		receiptOff("materialDigest", func(r *keyring.Retirement) { r.MaterialDigest = keyring.MaterialDigest([]byte("other")) }),
	}
	return rows
}

// receiptOff is a row whose Secret holds this operation's receipt for fxKey
// with one field changed by off: receipt-conflict, nothing written.
func receiptOff(field string, off func(r *keyring.Retirement)) row {
	return row{
		name: "receipt with another " + field + ": receipt-conflict",
		manifest: func(t testing.TB) *keyring.Manifest {
			m := retiredBy(t, standardKeyring(), fxMutation, fxKey)
			off(&m.Retirements[len(m.Retirements)-1])
			return m
		},
		runs: []runWant{refused(ReasonReceiptConflict)}, end: unchanged, gets: 1,
		trail: []string{"preparation", "observation", "refusal receipt-conflict"},
	}
}

// manifestOf builds a manifest from opts (as given: it may be invalid).
func manifestOf(opts ...keyringtest.Option) func(testing.TB) *keyring.Manifest {
	return func(testing.TB) *keyring.Manifest { return keyringtest.New(opts...) }
}

// standardOptions builds standardKeyring's keys (generation 4).
func standardOptions() []keyringtest.Option {
	return []keyringtest.Option{
		keyringtest.WithKey("k-2026-06", "2026-06-01T00:00:00Z", keyringtest.Material("k-2026-06")),
		keyringtest.WithKey("k-2026-07", "2026-07-01T00:00:00Z", keyringtest.Material("k-2026-07")),
		keyringtest.WithKey("k-2026-08", "2026-08-01T00:00:00Z", keyringtest.Material("k-2026-08")),
		keyringtest.WithActive("k-2026-08"),
		keyringtest.WithGeneration(4),
	}
}

// TestRetireTable drives the family through the engine and the in-memory
// journal against the API double, row by row.
func TestRetireTable(t *testing.T) {
	t.Parallel()
	for _, tc := range append(append(retireRows(t), refusalRows()...), replayRows()...) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t)
		})
	}
}

func (tc row) check(t *testing.T) {
	m := standardKeyring()
	if tc.manifest != nil {
		m = tc.manifest(t)
	}
	var s *corev1.Secret
	if !tc.missing {
		s = keyringSecret(m, tc.secret...)
	}
	var spec []func(*Spec)
	if tc.spec != nil {
		spec = append(spec, tc.spec)
	}
	sc := newScene(t, m, s, spec...)
	if tc.script != nil {
		tc.script(sc.api)
	}
	if tc.with != nil {
		tc.with(sc)
	}
	require.NotEmpty(t, tc.runs, "a row says what each run ends with")
	for i, want := range tc.runs {
		var j workflow.Store = sc.journal
		if i == 0 && tc.crash != nil {
			j = &crashingJournal{Store: sc.journal, crash: tc.crash}
		}
		res, err := sc.run(j)
		requireRun(t, i, want, res, err)
	}

	op, records := sc.operation()
	require.Equal(t, tc.trail, trail(records), "the journal's records")
	require.Len(t, replaced(sc.api), tc.writes, "writes this operation stored")
	require.Equal(t, tc.gets, gets(sc.api), "gets received")
	require.Equal(t, tc.replaces, replaces(sc.api), "replaces received")
	now := now(sc.api)
	switch tc.end {
	case unchanged:
		require.Equal(t, sc.start, now, "the Secret is untouched")
	case retired:
		requireRetired(t, now, m, op.CreatedAt)
		if tc.writes == 1 {
			require.Equal(t, replaced(sc.api)[0].Data, now.Data, "the one write stored the keyring")
		}
	case absent:
		require.Nil(t, now, "the Secret is absent")
	case theirsOnly:
		require.NotNil(t, now)
		require.NotEqual(t, sc.start, now, "someone else changed the Secret")
		if got, err := keyring.Parse(now.Data[fxDataKey]); err == nil {
			r, ok := got.Receipt(fxKey)
			require.False(t, ok && r.MutationID == fxMutation, "no receipt of this operation")
		}
	}
}

// requireRun checks what the i-th run ended with.
func requireRun(t *testing.T, i int, want runWant, res *workflow.Result, err error) {
	t.Helper()
	require.Equal(t, want, workflowtest.Ending(res, err), "run %d", i)
	if want == uncertain("interrupted") {
		require.ErrorIs(t, err, errCrash, "run %d", i)
	}
}
