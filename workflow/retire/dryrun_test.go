package retire

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/kubetest"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// keepOpen is the scene's journal handed to a dry run, which closes the
// journal it opened: this one stays open for the runs after it.
type keepOpen struct{ workflow.Store }

func (keepOpen) Close() {}

// dryRun plans the command (keyledger plan) against the scene's journal
// and double.
func (sc *scene) dryRun() (*workflow.DryRunResult, error) {
	deps := workflow.Deps{OpenStore: func(context.Context) (workflow.Store, error) { return keepOpen{sc.journal}, nil }}
	return workflow.DryRun(context.Background(), deps, sc.plan())
}

// call is what identifies an authority call across a dry run and a run.
type call struct {
	Step, Target, UID, ResourceVersion string
	Attempt                            int
}

func callsOf(records []store.Record) []call {
	var out []call
	for _, r := range records {
		if r.Kind == store.RecordAuthorityCall {
			out = append(out, call{r.Step, r.Target.String(), r.UID, r.ResourceVersion, r.Attempt})
		}
	}
	return out
}

// dryRow is one scenario of the retirement's dry run (workflowtest.Row):
// Setup builds the scene and makes the runs before it (the first may
// crash; given.with is someone else's move), the run under test is the dry
// run, Check is what it says and the run after it (dryWant).
type dryRow = workflowtest.Row[*dryEnv, dryRan]

// dryEnv is a row's world whose run under test is keyledger plan.
type dryEnv struct{ *env }

func newDryEnv(t *testing.T) *dryEnv { return &dryEnv{newEnv(t)} }

// dryGiven is the Setup that builds the scene g describes.
func dryGiven(g given) func(*dryEnv) {
	return func(d *dryEnv) { g.setup(d.env) }
}

// dryRan is what the dry run said, and what the double and the journal
// held just before it.
type dryRan struct {
	plan       *workflow.DryRunResult
	secret     *corev1.Secret
	read, sent int
	txs        int64
}

// Ending is the dry run's outcome (its Stopped, when it stopped).
func (r dryRan) Ending() string {
	if r.plan.Stopped != "" {
		return r.plan.Stopped
	}
	return string(r.plan.Outcome)
}

// Trail is the records the dry run says the run would journal.
func (r dryRan) Trail() []string { return trail(r.plan.Records) }

// Run plans the command (keyledger plan).
func (d *dryEnv) Run() dryRan {
	d.t.Helper()
	sc := d.sc
	r := dryRan{secret: now(sc.api), read: gets(sc.api), sent: replaces(sc.api), txs: sc.journal.Transactions()}
	plan, err := sc.dryRun()
	require.NoError(d.t, err)
	r.plan = plan
	return r
}

// dryWant is what a dry run says and what follows it.
type dryWant struct {
	journal string
	replay  bool
	outcome workflow.Outcome
	reason  string
	// stopped, when set, is the reason inside the dry run's Stopped.
	stopped string
	// trail is the records the dry run says the run would journal.
	trail []string
	// gets is the reads the dry run made.
	gets int
	// after, when set, is what the run following the dry run ends with;
	// its calls are the dry run's calls.
	after runWant
}

func (w dryWant) check(t *testing.T, d *dryEnv, r dryRan) {
	t.Helper()
	sc, plan := d.sc, r.plan
	require.Equal(t, r.secret, now(sc.api), "a dry run writes nothing to the API server")
	require.Equal(t, r.sent, replaces(sc.api), "a dry run sends no replace")
	require.Equal(t, w.gets, gets(sc.api)-r.read, "reads of the dry run")
	require.Equal(t, r.txs, sc.journal.Transactions(), "a dry run writes nothing to the journal")

	require.Equal(t, w.journal, plan.Journal)
	require.Equal(t, fxMutation, plan.Operation)
	require.Equal(t, w.replay, plan.Replay)
	require.Equal(t, w.outcome, plan.Outcome)
	require.Equal(t, w.reason, plan.Reason)
	if w.stopped != "" {
		require.Contains(t, plan.Stopped, "("+w.stopped+")")
	} else {
		require.Empty(t, plan.Stopped)
	}
	require.Equal(t, w.trail, r.Trail())
	if w.outcome == workflow.OutcomeCompleted || w.outcome == workflow.OutcomeConverged {
		require.Equal(t, r.secret.Name, workflowtest.Fields(plan.Summary)["secret"].(map[string]any)["name"])
		require.Equal(t, float64(d.m.Generation+1), workflowtest.Fields(plan.Summary)["generation"], "the summary names the generation the run would write")
	}

	if w.after == "" {
		return
	}
	var before []store.Record
	if d.runs > 0 {
		_, before = sc.operation()
	}
	d.crash = nil // the run after a dry run never crashes
	next := d.env.Run()
	requireRun(t, d.runs-1, w.after, next.res, next.err)
	require.Equal(t, callsOf(plan.Calls()), callsOf(next.records[len(before):]), "the run sends the calls the dry run planned")
}

func TestRetireDryRun(t *testing.T) {
	t.Parallel()
	plannedT := []string{"result applied planned", "completion completed"}
	rows := []dryRow{
		{
			Name:  "a fresh command: the one replace, as the run then sends it",
			Setup: dryGiven(given{}),
			Check: dryWant{journal: "new", outcome: workflow.OutcomeCompleted, gets: 1, trail: join([]string{"preparation"}, begun[1:], plannedT), after: completed()}.check,
		},
		{
			Name:  "the active key: refused as the run then refuses",
			Setup: dryGiven(given{spec: func(s *Spec) { s.KeyID = "k-2026-08" }}),
			Check: dryWant{journal: "new", outcome: workflow.OutcomeRefused, reason: keyring.ReasonKeyActive, gets: 1, trail: []string{"preparation", "observation", "refusal key-active"}, after: refused(keyring.ReasonKeyActive)}.check,
		},
		{
			Name:  "our receipt already in place: existing",
			Setup: dryGiven(given{manifest: func(t testing.TB) *keyring.Manifest { return retiredBy(t, standardKeyring(), fxMutation, fxKey) }}),
			Check: dryWant{journal: "new", outcome: workflow.OutcomeExisting, gets: 1, trail: []string{"preparation", "observation", "completion existing"}, after: existing()}.check,
		},
		{
			Name:  "a completed operation: a replay, confirmed by one read",
			Setup: dryGiven(given{before: []runWant{completed()}}),
			Check: dryWant{journal: "completed", replay: true, outcome: workflow.OutcomeExisting, gets: 1, after: replayed(existing())}.check,
		},
		{
			Name:  "a forged completion: refused as the run then refuses, read-only",
			Setup: dryGiven(given{with: func(sc *scene) { sc.forge() }}),
			Check: dryWant{journal: "completed", replay: true, outcome: workflow.OutcomeRefused, reason: ReasonReplayReceiptMissing, gets: 1, after: contradicted(ReasonReplayReceiptMissing)}.check,
		},
		{
			Name:  "a refused operation: the refusal replayed",
			Setup: dryGiven(given{spec: func(s *Spec) { s.KeyID = "k-2026-08" }, before: []runWant{refused(keyring.ReasonKeyActive)}}),
			Check: dryWant{journal: "refused", replay: true, outcome: workflow.OutcomeRefused, reason: keyring.ReasonKeyActive}.check,
		},
		{
			Name:  "left in calling with the write applied: resolved as ours",
			Setup: dryGiven(given{crash: leaving(store.StateCalling), before: []runWant{uncertain("interrupted")}}),
			Check: dryWant{journal: "calling", outcome: workflow.OutcomeConverged, gets: 1, trail: []string{"result lost no-result-recorded", "resolution ours", "completion converged"}, after: converged()}.check,
		},
		{
			Name:  "left in resolving with the write not applied: sent again",
			Setup: dryGiven(given{script: func(d *kubetest.Server) { onReplace(d, kubetest.LostBefore()) }, crash: leaving(store.StateResolving), before: []runWant{uncertain("interrupted")}}),
			Check: dryWant{journal: "resolving", outcome: workflow.OutcomeCompleted, gets: 1, trail: join([]string{"resolution not-applied resource-version-unchanged", "call 2"}, plannedT), after: completed()}.check,
		},
		{
			Name: "the resolving read fails: stopped, a run would be uncertain",
			Setup: dryGiven(given{script: func(d *kubetest.Server) {
				onReplace(d, kubetest.AppliedLost())
				onGet(d, kubetest.Pass(), serverError, serverError)
			}, crash: leaving(store.StateResolving), before: []runWant{uncertain("interrupted")}}),
			Check: dryWant{journal: "resolving", stopped: "read-failed", gets: 1, trail: []string{"resolution undetermined read-failed"}, after: converged()}.check,
		},
	}
	workflowtest.RunRows(t, newDryEnv, rows)
}
