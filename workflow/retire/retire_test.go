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
	op, records, err := sc.journal.Snapshot(context.Background(), "", fxMutation)
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

// row is one scenario of the retirement table (workflowtest.Row): Setup
// builds the scene (given), Want is what the last run of the command ends
// with, Trail the journal's records, Check the Secret and the calls
// afterwards (after).
type row = workflowtest.Row[*env, ran]

// given is a scenario's world before the run under test.
type given struct {
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
	// before is what each run of the same command before the one under
	// test ends with, in order.
	before []runWant
}

// env is one row's world: the scene, the manifest it started from, the
// crash still to come and how many runs were made.
type env struct {
	t     *testing.T
	sc    *scene
	m     *keyring.Manifest
	crash func(p store.TransitionParams) bool
	runs  int
}

func newEnv(t *testing.T) *env { return &env{t: t} }

// setup builds the scene g describes, then makes the runs before the one
// under test.
func (g given) setup(e *env) {
	e.t.Helper()
	e.m = standardKeyring()
	if g.manifest != nil {
		e.m = g.manifest(e.t)
	}
	var s *corev1.Secret
	if !g.missing {
		s = keyringSecret(e.m, g.secret...)
	}
	var spec []func(*Spec)
	if g.spec != nil {
		spec = append(spec, g.spec)
	}
	e.sc = newScene(e.t, e.m, s, spec...)
	if g.script != nil {
		g.script(e.sc.api)
	}
	if g.with != nil {
		g.with(e.sc)
	}
	e.crash = g.crash
	for _, want := range g.before {
		r := e.Run()
		requireRun(e.t, e.runs-1, want, r.res, r.err)
	}
}

// ran is one run's end and the journal after it.
type ran struct {
	res     *workflow.Result
	err     error
	op      *store.Operation
	records []store.Record
}

// Ending is the run's ending, in workflowtest.Ending's spelling.
func (r ran) Ending() string { return workflowtest.Ending(r.res, r.err) }

// Trail is the journal's records in short (see trail).
func (r ran) Trail() []string { return trail(r.records) }

// Run runs the command once; the first run meets the scenario's crash.
func (e *env) Run() ran {
	e.t.Helper()
	var j workflow.Store = e.sc.journal
	if e.runs == 0 && e.crash != nil {
		j = &crashingJournal{Store: e.sc.journal, crash: e.crash}
	}
	e.runs++
	res, err := e.sc.run(j)
	op, records := e.sc.operation()
	return ran{res: res, err: err, op: op, records: records}
}

// Finish: nothing beyond each row's Check.
func (e *env) Finish(*testing.T) {}

// after is what holds once the last run ended: the Secret, the writes
// this operation's Replace stored, the calls the double received.
type after struct {
	end            ending
	writes         int
	gets, replaces int
}

func (a after) check(t *testing.T, e *env, r ran) {
	t.Helper()
	sc := e.sc
	if r.Ending() == uncertain("interrupted") {
		require.ErrorIs(t, r.err, errCrash, "run %d", e.runs-1)
	}
	require.Len(t, replaced(sc.api), a.writes, "writes this operation stored")
	require.Equal(t, a.gets, gets(sc.api), "gets received")
	require.Equal(t, a.replaces, replaces(sc.api), "replaces received")
	now := now(sc.api)
	switch a.end {
	case unchanged:
		require.Equal(t, sc.start, now, "the Secret is untouched")
	case retired:
		requireRetired(t, now, e.m, r.op.CreatedAt)
		if a.writes == 1 {
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
			Name:  "applied",
			Setup: given{}.setup,
			Want:  completed(),
			Trail: join(begun, appliedT),
			Check: after{end: retired, writes: 1, gets: 1, replaces: 1}.check,
		},
		{
			Name:  "lost-after-apply: resolution finds our receipt",
			Setup: given{script: func(d *kubetest.Server) { onReplace(d, kubetest.AppliedLost()) }}.setup,
			Want:  converged(),
			Trail: join(begun, []string{"result unknown lost", "resolution ours", "completion converged"}),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name:  "lost-before-apply: unchanged resourceVersion, sent again",
			Setup: given{script: func(d *kubetest.Server) { onReplace(d, kubetest.LostBefore()) }}.setup,
			Want:  completed(),
			Trail: join(begun, []string{"result unknown lost", "resolution not-applied resource-version-unchanged", "call 2"}, appliedT),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 2}.check,
		},
		{
			Name:  "500 not applied: sent again",
			Setup: given{script: func(d *kubetest.Server) { onReplace(d, serverError) }}.setup,
			Want:  completed(),
			Trail: join(begun, []string{"result unknown server-error", "resolution not-applied resource-version-unchanged", "call 2"}, appliedT),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 2}.check,
		},
		{
			Name:  "409: someone else replaced the Secret",
			Setup: given{script: func(d *kubetest.Server) { onReplace(d, kubetest.Theirs(annotate)) }}.setup,
			Want:  refused(ReasonChangedConcurrent),
			Trail: join(begun, []string{"result unknown conflict", "resolution theirs changed-concurrently", "refusal changed-concurrently"}),
			Check: after{end: theirsOnly, gets: 2, replaces: 1}.check,
		},
		{
			Name: "409: someone else retired the key with another receipt",
			Setup: given{script: func(d *kubetest.Server) {
				onReplace(d, kubetest.Theirs(func(d *kubetest.Server) {
					theirUpdate(d, holding(retiredBy(t, standardKeyring(), "mut-other", fxKey)))
				}))
			}}.setup,
			Want:  refused(ReasonReceiptConflict),
			Trail: join(begun, []string{"result unknown conflict", "resolution theirs receipt-conflict", "refusal receipt-conflict"}),
			Check: after{end: theirsOnly, gets: 2, replaces: 1}.check,
		},
		{
			Name:  "409 with no change found: sent again",
			Setup: given{script: func(d *kubetest.Server) { onReplace(d, conflict) }}.setup,
			Want:  completed(),
			Trail: join(begun, []string{"result unknown conflict", "resolution not-applied resource-version-unchanged", "call 2"}, appliedT),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 2}.check,
		},
		{
			Name:  "404 on replace and on resolve: someone else deleted the Secret",
			Setup: given{script: func(d *kubetest.Server) { onReplace(d, kubetest.Theirs(theirDelete)) }}.setup,
			Want:  refused(ReasonSecretAbsent),
			Trail: join(begun, []string{"result unknown not-found", "resolution theirs secret-absent", "refusal secret-absent"}),
			Check: after{end: absent, gets: 2, replaces: 1}.check,
		},
		{
			Name: "lost-after-apply, then deleted: 404 on resolve",
			Setup: given{script: func(d *kubetest.Server) {
				onReplace(d, kubetest.AppliedLost())
				onGet(d, kubetest.Pass(), kubetest.Theirs(theirDelete))
			}}.setup,
			Want:  refused(ReasonSecretAbsent),
			Trail: join(begun, []string{"result unknown lost", "resolution theirs secret-absent", "refusal secret-absent"}),
			Check: after{end: absent, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name: "lost-after-apply, then edited by someone else: our receipt stays ours",
			Setup: given{script: func(d *kubetest.Server) {
				onReplace(d, kubetest.AppliedLost())
				onGet(d, kubetest.Pass(), kubetest.Theirs(annotate))
			}}.setup,
			Want:  converged(),
			Trail: join(begun, []string{"result unknown lost", "resolution ours", "completion converged"}),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name: "lost-after-apply, then re-created by someone else: uid-changed on resolve",
			Setup: given{script: func(d *kubetest.Server) {
				onReplace(d, kubetest.AppliedLost())
				onGet(d, kubetest.Pass(), kubetest.Theirs(func(d *kubetest.Server) {
					theirDelete(d)
					d.Seed(kubetest.Secrets, keyringSecret(standardKeyring()))
				}))
			}}.setup,
			Want:  refused(ReasonUIDChanged),
			Trail: join(begun, []string{"result unknown lost", "resolution theirs uid-changed", "refusal uid-changed"}),
			Check: after{end: theirsOnly, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name: "lost-before-apply, then someone else's write: changed-concurrently",
			Setup: given{script: func(d *kubetest.Server) {
				onReplace(d, kubetest.LostBefore())
				onGet(d, kubetest.Pass(), kubetest.Theirs(annotate))
			}}.setup,
			Want:  refused(ReasonChangedConcurrent),
			Trail: join(begun, []string{"result unknown lost", "resolution theirs changed-concurrently", "refusal changed-concurrently"}),
			Check: after{end: theirsOnly, gets: 2, replaces: 1}.check,
		},
		{
			Name: "a concurrent run of the same command wins the race: written once",
			Setup: given{with: func(sc *scene) {
				onReplace(sc.api, kubetest.Theirs(func(*kubetest.Server) {
					// The other process, start to end, while this one's
					// replace is in flight.
					res, err := sc.run(nil)
					require.NoError(sc.t, err)
					require.Equal(sc.t, workflow.OutcomeCompleted, res.Outcome)
				}))
			}}.setup,
			// This run wrote nothing and ended nothing: the other
			// process's write and ending are found on a reload.
			Want:  existing(),
			Trail: join(begun, []string{"result lost no-result-recorded", "resolution not-applied resource-version-unchanged", "call 2"}, appliedT),
			Check: after{end: retired, writes: 1, gets: 3, replaces: 2}.check, // the third get confirms the completion the other process journaled
		},
		{
			Name:  "403: rejected, nothing written",
			Setup: given{script: func(d *kubetest.Server) { onReplace(d, forbidden) }}.setup,
			Want:  refused("forbidden"),
			Trail: join(begun, []string{"result rejected forbidden", "refusal forbidden"}),
			Check: after{end: unchanged, gets: 1, replaces: 1}.check,
		},
		{
			Name:  "422: rejected, nothing written",
			Setup: given{script: func(d *kubetest.Server) { onReplace(d, invalid) }}.setup,
			Want:  refused("invalid"),
			Trail: join(begun, []string{"result rejected invalid", "refusal invalid"}),
			Check: after{end: unchanged, gets: 1, replaces: 1}.check,
		},
		{
			Name: "result-mismatch: a stale object came back, settled by re-reading",
			Setup: given{script: func(d *kubetest.Server) {
				stale := now(d)
				onReplace(d, kubetest.Answer(kubetest.OnSecret(func(s *corev1.Secret) { *s = *stale })))
			}}.setup,
			Want:  converged(),
			Trail: join(begun, []string{"result unknown result-mismatch", "resolution ours", "completion converged"}),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name: "result-mismatch: an unreadable object came back, settled by re-reading",
			Setup: given{script: func(d *kubetest.Server) {
				onReplace(d, kubetest.Answer(kubetest.OnSecret(func(s *corev1.Secret) { s.Type = corev1.SecretTypeTLS })))
			}}.setup,
			Want:  converged(),
			Trail: join(begun, []string{"result unknown result-mismatch", "resolution ours", "completion converged"}),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name: "result-mismatch: the precondition's resourceVersion came back",
			Setup: given{script: func(d *kubetest.Server) {
				rv := now(d).ResourceVersion
				onReplace(d, kubetest.Answer(kubetest.OnSecret(func(s *corev1.Secret) { s.ResourceVersion = rv })))
			}}.setup,
			Want:  converged(),
			Trail: join(begun, []string{"result unknown result-mismatch", "resolution ours", "completion converged"}),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name: "result-mismatch: a webhook put the old keyring back, someone else's",
			Setup: given{script: func(d *kubetest.Server) {
				onReplace(d, kubetest.Admission(kubetest.OnSecret(func(s *corev1.Secret) {
					holding(standardKeyring())(s)
					s.Annotations["example.com/reverted"] = "yes"
				})))
			}}.setup,
			Want:  refused(ReasonChangedConcurrent),
			Trail: join(begun, []string{"result unknown result-mismatch", "resolution theirs changed-concurrently", "refusal changed-concurrently"}),
			Check: after{end: theirsOnly, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name: "500 on the resolving read: uncertain, a rerun settles it",
			Setup: given{script: func(d *kubetest.Server) {
				onReplace(d, kubetest.AppliedLost())
				onGet(d, kubetest.Pass(), serverError)
			}, before: []runWant{uncertain("read-failed")}}.setup,
			Want:  converged(),
			Trail: join(begun, []string{"result unknown lost", "resolution undetermined read-failed", "resolution ours", "completion converged"}),
			Check: after{end: retired, writes: 1, gets: 3, replaces: 1}.check,
		},
		{
			Name: "lost three times: attempts exhausted, a rerun completes",
			Setup: given{script: func(d *kubetest.Server) {
				onReplace(d, kubetest.LostBefore(), kubetest.LostBefore(), kubetest.LostBefore())
			}, before: []runWant{uncertain("attempts-exhausted")}}.setup,
			Want: completed(),
			Trail: join(begun,
				[]string{"result unknown lost", "resolution not-applied resource-version-unchanged", "call 2"},
				[]string{"result unknown lost", "resolution not-applied resource-version-unchanged", "call 3"},
				[]string{"result unknown lost", "resolution not-applied resource-version-unchanged"},
				[]string{"resolution not-applied resource-version-unchanged", "call 4"}, appliedT),
			Check: after{end: retired, writes: 1, gets: 5, replaces: 4}.check,
		},
		{
			Name:  "500 on the first read: unavailable before any call, a rerun completes",
			Setup: given{script: func(d *kubetest.Server) { onGet(d, serverError) }, before: []runWant{unavailable()}}.setup,
			Want:  completed(),
			Trail: join(begun, appliedT),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 1}.check,
		},

		// Resumes: the first run ends right before a journal commit.
		{
			Name:  "resume from prepared",
			Setup: given{crash: leaving(store.StatePrepared), before: []runWant{uncertain("interrupted")}}.setup,
			Want:  completed(),
			Trail: join(begun, appliedT),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name:  "resume from calling, the write applied",
			Setup: given{crash: leaving(store.StateCalling), before: []runWant{uncertain("interrupted")}}.setup,
			Want:  converged(),
			Trail: join(begun, []string{"result lost no-result-recorded", "resolution ours", "completion converged"}),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name:  "resume from calling, the write not applied",
			Setup: given{crash: leaving(store.StateCalling), script: func(d *kubetest.Server) { onReplace(d, kubetest.LostBefore()) }, before: []runWant{uncertain("interrupted")}}.setup,
			Want:  completed(),
			Trail: join(begun, []string{"result lost no-result-recorded", "resolution not-applied resource-version-unchanged", "call 2"}, appliedT),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 2}.check,
		},
		{
			Name: "resume from calling, not applied and changed since",
			Setup: given{crash: leaving(store.StateCalling), script: func(d *kubetest.Server) {
				onReplace(d, kubetest.LostBefore())
				onGet(d, kubetest.Pass(), kubetest.Theirs(annotate))
			}, before: []runWant{uncertain("interrupted")}}.setup,
			Want:  refused(ReasonChangedConcurrent),
			Trail: join(begun, []string{"result lost no-result-recorded", "resolution theirs changed-concurrently", "refusal changed-concurrently"}),
			Check: after{end: theirsOnly, gets: 2, replaces: 1}.check,
		},
		{
			Name:  "resume from resolving, the write applied",
			Setup: given{crash: leaving(store.StateResolving), script: func(d *kubetest.Server) { onReplace(d, kubetest.AppliedLost()) }, before: []runWant{uncertain("interrupted")}}.setup,
			Want:  converged(),
			Trail: join(begun, []string{"result unknown lost", "resolution ours", "completion converged"}),
			Check: after{end: retired, writes: 1, gets: 3, replaces: 1}.check,
		},
		{
			Name:  "resume from resolving, the write not applied",
			Setup: given{crash: leaving(store.StateResolving), script: func(d *kubetest.Server) { onReplace(d, kubetest.LostBefore()) }, before: []runWant{uncertain("interrupted")}}.setup,
			Want:  completed(),
			Trail: join(begun, []string{"result unknown lost", "resolution not-applied resource-version-unchanged", "call 2"}, appliedT),
			Check: after{end: retired, writes: 1, gets: 3, replaces: 2}.check,
		},

		// Replays.
		{
			Name:  "replay of a completed operation: one read confirms it, nothing written",
			Setup: given{before: []runWant{completed()}}.setup,
			Want:  replayed(completed()),
			Trail: join(begun, appliedT),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name:  "replay of a converged operation",
			Setup: given{script: func(d *kubetest.Server) { onReplace(d, kubetest.AppliedLost()) }, before: []runWant{converged()}}.setup,
			Want:  replayed(converged()),
			Trail: join(begun, []string{"result unknown lost", "resolution ours", "completion converged"}),
			Check: after{end: retired, writes: 1, gets: 3, replaces: 1}.check,
		},
		{
			Name:  "replay of a refused operation",
			Setup: given{spec: func(s *Spec) { s.KeyID = "k-2026-08" }, before: []runWant{refused(keyring.ReasonKeyActive)}}.setup,
			Want:  replayed(refused(keyring.ReasonKeyActive)),
			Trail: []string{"preparation", "observation", "refusal key-active"},
			Check: after{end: unchanged, gets: 1}.check,
		},
		{
			Name: "our receipt already in place (the journal was lost): existing, nothing written",
			Setup: given{manifest: func(t testing.TB) *keyring.Manifest {
				return retiredBy(t, standardKeyring(), fxMutation, fxKey)
			}}.setup,
			Want:  existing(),
			Trail: []string{"preparation", "observation", "completion existing"},
			Check: after{end: unchanged, gets: 1}.check,
		},
		{
			Name: "someone else's receipt already in place: receipt-conflict",
			Setup: given{manifest: func(t testing.TB) *keyring.Manifest {
				return retiredBy(t, standardKeyring(), "mut-other", fxKey)
			}}.setup,
			Want:  refused(ReasonReceiptConflict),
			Trail: []string{"preparation", "observation", "refusal receipt-conflict"},
			Check: after{end: unchanged, gets: 1}.check,
		},
	}
}

// refusalRows: every refusal Decide reaches, before any call: each reason
// decodeKeyring gives (the Secret's shape, then the manifest's parse) and each
// the retirement itself gives. None sends a call or writes.
func refusalRows() []row {
	shape := []string{"preparation"}
	observed := []string{"preparation", "observation"}
	refusal := func(name, reason string, before []string, m func(testing.TB) *keyring.Manifest, spec func(*Spec), secret ...secretOption) row {
		return row{
			Name:  name + ": " + reason,
			Setup: given{manifest: m, spec: spec, secret: secret}.setup,
			Want:  refused(reason),
			Trail: join(before, []string{"refusal " + reason}),
			Check: after{end: unchanged, gets: 1}.check,
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
			Name:  "absent Secret: secret-absent",
			Setup: given{missing: true}.setup,
			Want:  refused(ReasonSecretAbsent),
			Trail: []string{"preparation", "refusal secret-absent"},
			Check: after{end: absent, gets: 1}.check,
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
		Name: "receipt with another " + field + ": receipt-conflict",
		Setup: given{manifest: func(t testing.TB) *keyring.Manifest {
			m := retiredBy(t, standardKeyring(), fxMutation, fxKey)
			off(&m.Retirements[len(m.Retirements)-1])
			return m
		}}.setup,
		Want:  refused(ReasonReceiptConflict),
		Trail: []string{"preparation", "observation", "refusal receipt-conflict"},
		Check: after{end: unchanged, gets: 1}.check,
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
	workflowtest.RunRows(t, newEnv, append(append(retireRows(t), refusalRows()...), replayRows()...))
}

// requireRun checks what the i-th run ended with.
func requireRun(t *testing.T, i int, want runWant, res *workflow.Result, err error) {
	t.Helper()
	require.Equal(t, want, workflowtest.Ending(res, err), "run %d", i)
	if want == uncertain("interrupted") {
		require.ErrorIs(t, err, errCrash, "run %d", i)
	}
}
