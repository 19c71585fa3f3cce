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
)

// forge journals, as anyone who can write the journal could, a completed
// operation for the scene's command that the API server never saw: its
// preparation, then records (in the shape a run journals them) and a
// completion in one move. Every field of a retirement command is public.
func (sc *scene) forge(records ...store.Record) {
	sc.t.Helper()
	ctx := context.Background()
	op, created, err := sc.journal.Prepare(ctx, preparation(sc.cmd))
	require.NoError(sc.t, err)
	require.True(sc.t, created)
	records = append(records, store.Record{Kind: store.RecordCompletion, Step: "complete", Status: store.Status(workflow.OutcomeCompleted)})
	_, err = sc.journal.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCompleted,
		Revision: op.Revision, Outcome: string(workflow.OutcomeCompleted), Records: records})
	require.NoError(sc.t, err)
}

// forgedRun is what a run's replace journals, copied from the Secret as it
// is: the observation, the call and an applied answer.
func forgedRun(sc *scene) []store.Record {
	s := now(sc.api)
	target := store.SecretTarget(s.Namespace, s.Name)
	return []store.Record{
		{Kind: store.RecordObservation, Step: "read-keyring", Target: target, UID: string(s.UID), ResourceVersion: s.ResourceVersion},
		{Kind: store.RecordAuthorityCall, Step: stepReplace, Target: target, Attempt: 1, UID: string(s.UID), ResourceVersion: s.ResourceVersion,
			Batch: 1, Final: true},
		{Kind: store.RecordAuthorityResult, Step: stepReplace, Target: target, UID: string(s.UID), ResourceVersion: "999", Status: "applied"},
	}
}

// contradicted is a replay the cluster contradicts: refused with reason,
// nothing appended, the journaled ending not reported.
func contradicted(reason string) runWant {
	return replayed(refused(reason))
}

// replayRows: a completed operation is a replay only with the keyring
// Secret's agreement, read in this run (ConfirmReplay). A forged
// completion (the journal says completed, the Secret shows no retirement)
// and a genuine one the Secret no longer bears out refuse with a replay-
// reason, write nothing and append nothing.
func replayRows() []row {
	forged := []string{"preparation", "completion completed"}
	forgedShape := []string{"preparation", "observation", "call 1", "result applied", "completion completed"}
	then := func(move func(d *kubetest.Server)) func(d *kubetest.Server) {
		return func(d *kubetest.Server) { onGet(d, kubetest.Pass(), kubetest.Theirs(move)) }
	}
	return []row{
		{
			Name:  "a forged completion of a pending retirement: replay-receipt-missing, nothing written",
			Setup: given{with: func(sc *scene) { sc.forge() }}.setup,
			Want:  contradicted(ReasonReplayReceiptMissing),
			Trail: forged,
			Check: after{end: unchanged, gets: 1}.check,
		},
		{
			Name:  "a forged completion in the shape a run journals: replay-receipt-missing",
			Setup: given{with: func(sc *scene) { sc.forge(forgedRun(sc)...) }}.setup,
			Want:  contradicted(ReasonReplayReceiptMissing),
			Trail: forgedShape,
			Check: after{end: unchanged, gets: 1}.check,
		},
		{
			Name: "a forged completion bound to another UID: replay-uid-changed",
			Setup: given{with: func(sc *scene) {
				records := forgedRun(sc)
				for i := range records {
					records[i].UID = "00000000-0000-4000-8000-00000000beef"
				}
				sc.forge(records...)
			}}.setup,
			Want:  contradicted(ReasonReplayUIDChanged),
			Trail: forgedShape,
			Check: after{end: unchanged, gets: 1}.check,
		},
		{
			Name: "a forged completion, someone else's receipt for the key: replay-receipt-conflict",
			Setup: given{manifest: func(t testing.TB) *keyring.Manifest {
				return retiredBy(t, standardKeyring(), "mut-other", fxKey)
			}, with: func(sc *scene) { sc.forge() }}.setup,
			Want:  contradicted(ReasonReplayReceiptConflict),
			Trail: forged,
			Check: after{end: unchanged, gets: 1}.check,
		},
		{
			Name:  "a forged completion, the Secret absent: replay-secret-absent",
			Setup: given{missing: true, with: func(sc *scene) { sc.forge() }}.setup,
			Want:  contradicted(ReasonReplaySecretAbsent),
			Trail: forged,
			Check: after{end: absent, gets: 1}.check,
		},
		{
			Name:  "a genuine retirement, the old keyring put back since: replay-receipt-missing",
			Setup: given{script: then(func(d *kubetest.Server) { theirUpdate(d, holding(standardKeyring())) }), before: []runWant{completed()}}.setup,
			Want:  contradicted(ReasonReplayReceiptMissing),
			Trail: join(begun, appliedT),
			Check: after{end: theirsOnly, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name:  "a genuine retirement, the Secret deleted since: replay-secret-absent",
			Setup: given{script: then(theirDelete), before: []runWant{completed()}}.setup,
			Want:  contradicted(ReasonReplaySecretAbsent),
			Trail: join(begun, appliedT),
			Check: after{end: absent, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name: "a genuine retirement, the Secret re-created since: replay-uid-changed",
			Setup: given{script: then(func(d *kubetest.Server) {
				theirDelete(d)
				d.Seed(kubetest.Secrets, keyringSecret(standardKeyring()))
			}), before: []runWant{completed()}}.setup,
			Want:  contradicted(ReasonReplayUIDChanged),
			Trail: join(begun, appliedT),
			Check: after{end: theirsOnly, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name: "a genuine retirement, the keyring label removed since: replay-not-managed",
			Setup: given{script: then(func(d *kubetest.Server) {
				theirUpdate(d, func(s *corev1.Secret) { delete(s.Labels, LabelKeyring) })
			}), before: []runWant{completed()}}.setup,
			Want:  contradicted(workflow.ReplayPrefix + ReasonNotManaged),
			Trail: join(begun, appliedT),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 1}.check,
		},
		{
			Name:  "a genuine retirement, the confirming read fails: unavailable, never existing",
			Setup: given{script: func(d *kubetest.Server) { onGet(d, kubetest.Pass(), serverError) }, before: []runWant{completed()}}.setup,
			Want:  replayed(unavailable()),
			Trail: join(begun, appliedT),
			Check: after{end: retired, writes: 1, gets: 2, replaces: 1}.check,
		},
	}
}

// A forged completion is evidence: it stays in the journal, final, and is
// never reopened. The same retirement under a new mutationId is a new
// operation: it reads the Secret, retires the key once, and from then on
// the forged operation's replay is contradicted by the new receipt
// (another mutationId's), never reported existing.
func TestRetireForgedCompletionThenANewMutationID(t *testing.T) {
	t.Parallel()
	m := standardKeyring()
	sc := newScene(t, m, keyringSecret(m))
	sc.forge()

	res, err := sc.run(nil)
	requireRun(t, 0, contradicted(ReasonReplayReceiptMissing), res, err)
	require.Equal(t, sc.start, now(sc.api), "nothing written")
	require.Zero(t, replaces(sc.api))

	fresh := *sc.cmd
	fresh.Metadata.MutationID = "mut-8"
	plan := workflow.Plan{Prepare: preparation(&fresh), Family: &family{cmd: &fresh, secret: keyringAPI{sc.api, fxSecret}}}
	res, err = workflow.Operate(context.Background(), sc.journal, plan, nil)
	require.NoError(t, err)
	require.Equal(t, workflow.OutcomeCompleted, res.Outcome)
	require.Len(t, replaced(sc.api), 1, "the key is retired by one write")
	got, err := keyring.Parse(now(sc.api).Data[fxDataKey])
	require.NoError(t, err)
	r, ok := got.Receipt(fxKey)
	require.True(t, ok)
	require.Equal(t, "mut-8", r.MutationID)
	_, present := got.Key(fxKey)
	require.False(t, present)

	res, err = sc.run(nil)
	requireRun(t, 1, contradicted(ReasonReplayReceiptConflict), res, err)
	op, records := sc.operation()
	require.Equal(t, store.StateCompleted, op.State, "the forged operation stays as it was")
	require.Equal(t, []string{"preparation", "completion completed"}, trail(records))
	require.Len(t, replaced(sc.api), 1)
}
