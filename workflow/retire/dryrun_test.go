package retire

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

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
			out = append(out, call{r.Step, r.Target, r.UID, r.ResourceVersion, r.Attempt})
		}
	}
	return out
}

// dryRow is one scenario of the retirement's dry run: the runs before it
// (the first may crash), what the dry run says, and the run after it.
type dryRow struct {
	name     string
	manifest func(t testing.TB) *keyring.Manifest
	spec     func(*Spec)
	script   func(d *kubetest.Server)
	crash    func(p store.TransitionParams) bool
	before   []runWant
	// with, when set, runs after the runs before (someone else's move).
	with func(sc *scene)

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

func TestRetireDryRun(t *testing.T) {
	t.Parallel()
	plannedT := []string{"result applied planned", "completion completed"}
	rows := []dryRow{
		{
			name: "a fresh command: the one replace, as the run then sends it", journal: "new",
			outcome: workflow.OutcomeCompleted, gets: 1,
			trail: join([]string{"preparation"}, begun[1:], plannedT),
			after: completed(),
		},
		{
			name: "the active key: refused as the run then refuses", journal: "new",
			spec:    func(s *Spec) { s.KeyID = "k-2026-08" },
			outcome: workflow.OutcomeRefused, reason: keyring.ReasonKeyActive, gets: 1,
			trail: []string{"preparation", "observation", "refusal key-active"},
			after: refused(keyring.ReasonKeyActive),
		},
		{
			name: "our receipt already in place: existing", journal: "new",
			manifest: func(t testing.TB) *keyring.Manifest { return retiredBy(t, standardKeyring(), fxMutation, fxKey) },
			outcome:  workflow.OutcomeExisting, gets: 1,
			trail: []string{"preparation", "observation", "completion existing"},
			after: existing(),
		},
		{
			name:   "a completed operation: a replay, confirmed by one read",
			before: []runWant{completed()}, journal: "completed", replay: true,
			outcome: workflow.OutcomeExisting, gets: 1,
			after: replayed(existing()),
		},
		{
			name: "a forged completion: refused as the run then refuses, read-only",
			with: func(sc *scene) { sc.forge() }, journal: "completed", replay: true,
			outcome: workflow.OutcomeRefused, reason: ReasonReplayReceiptMissing, gets: 1,
			after: contradicted(ReasonReplayReceiptMissing),
		},
		{
			name: "a refused operation: the refusal replayed", spec: func(s *Spec) { s.KeyID = "k-2026-08" },
			before: []runWant{refused(keyring.ReasonKeyActive)}, journal: "refused", replay: true,
			outcome: workflow.OutcomeRefused, reason: keyring.ReasonKeyActive,
		},
		{
			name:  "left in calling with the write applied: resolved as ours",
			crash: leaving(store.StateCalling), before: []runWant{uncertain("interrupted")}, journal: "calling",
			outcome: workflow.OutcomeConverged, gets: 1,
			trail: []string{"result lost no-result-recorded", "resolution ours", "completion converged"},
			after: converged(),
		},
		{
			name:   "left in resolving with the write not applied: sent again",
			script: func(d *kubetest.Server) { onReplace(d, kubetest.LostBefore()) },
			crash:  leaving(store.StateResolving), before: []runWant{uncertain("interrupted")}, journal: "resolving",
			outcome: workflow.OutcomeCompleted, gets: 1,
			trail: join([]string{"resolution not-applied resource-version-unchanged", "call 2"}, plannedT),
			after: completed(),
		},
		{
			name: "the resolving read fails: stopped, a run would be uncertain",
			script: func(d *kubetest.Server) {
				onReplace(d, kubetest.AppliedLost())
				onGet(d, kubetest.Pass(), serverError, serverError)
			},
			crash: leaving(store.StateResolving), before: []runWant{uncertain("interrupted")}, journal: "resolving",
			stopped: "read-failed", gets: 1,
			trail: []string{"resolution undetermined read-failed"},
			after: converged(),
		},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := standardKeyring()
			if tc.manifest != nil {
				m = tc.manifest(t)
			}
			var spec []func(*Spec)
			if tc.spec != nil {
				spec = append(spec, tc.spec)
			}
			sc := newScene(t, m, keyringSecret(m), spec...)
			if tc.script != nil {
				tc.script(sc.api)
			}
			for i, want := range tc.before {
				var j workflow.Store = sc.journal
				if i == 0 && tc.crash != nil {
					j = &crashingJournal{Store: sc.journal, crash: tc.crash}
				}
				res, err := sc.run(j)
				requireRun(t, i, want, res, err)
			}

			if tc.with != nil {
				tc.with(sc)
			}
			secret, read, sent, txs := now(sc.api), gets(sc.api), replaces(sc.api), sc.journal.Transactions()
			plan, err := sc.dryRun()
			require.NoError(t, err)
			require.Equal(t, secret, now(sc.api), "a dry run writes nothing to the API server")
			require.Equal(t, sent, replaces(sc.api), "a dry run sends no replace")
			require.Equal(t, tc.gets, gets(sc.api)-read, "reads of the dry run")
			require.Equal(t, txs, sc.journal.Transactions(), "a dry run writes nothing to the journal")

			require.Equal(t, tc.journal, plan.Journal)
			require.Equal(t, fxMutation, plan.Operation)
			require.Equal(t, tc.replay, plan.Replay)
			require.Equal(t, tc.outcome, plan.Outcome)
			require.Equal(t, tc.reason, plan.Reason)
			if tc.stopped != "" {
				require.Contains(t, plan.Stopped, "("+tc.stopped+")")
			} else {
				require.Empty(t, plan.Stopped)
			}
			require.Equal(t, tc.trail, trail(plan.Records))
			if tc.outcome == workflow.OutcomeCompleted || tc.outcome == workflow.OutcomeConverged {
				require.Equal(t, secret.Name, workflowtest.Fields(plan.Summary)["secret"].(map[string]any)["name"])
				require.Equal(t, float64(m.Generation+1), workflowtest.Fields(plan.Summary)["generation"], "the summary names the generation the run would write")
			}

			if tc.after == "" {
				return
			}
			var before []store.Record
			if len(tc.before) > 0 {
				_, before = sc.operation()
			}
			res, err := sc.run(nil)
			requireRun(t, len(tc.before), tc.after, res, err)
			_, records := sc.operation()
			require.Equal(t, callsOf(plan.Calls()), callsOf(records[len(before):]), "the run sends the calls the dry run planned")
		})
	}
}
