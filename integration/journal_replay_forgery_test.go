package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/retire"
	"github.com/keyledger/keyledger/workflow/retire/keyring/keyringtest"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// runJournalURL is the journal connection the harness hands keyledger runs
// (KEYLEDGER_DATABASE_URL in env.keyledger): the forger below holds exactly
// what a run holds. It is one function so that when runs connect as their
// namespace's own role, the forgery does too.
func (e *env) runJournalURL() string { return e.journal.OperatorURL }

// forgeOperation is the attack of issues 18 and 35: with the run's own
// journal role and plain SQL (no keyledger code), it journals in one
// transaction the operation p, its preparation (the command digest a real
// run computes) and records in the shape a run journals them, left in
// state: calling (an interrupted run whose last call's answer was never
// recorded) or completed (then ending with a completion record).
func forgeOperation(t *testing.T, url string, p store.PrepareParams, state store.State, records ...store.Record) {
	t.Helper()
	ctx := t.Context()
	conn := connect(t, url)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var id int64
	require.NoError(t, tx.QueryRow(ctx, `
		INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name, expected_uid)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
		p.Kind, p.MutationID, p.RequestID, p.CommandDigest, p.Namespace, p.Name, p.ExpectedUID).Scan(&id))
	insert := func(r store.Record) {
		t.Helper()
		var attempt, batch *int
		if r.Kind == store.RecordAuthorityCall {
			attempt, batch = &r.Attempt, &r.Batch
		}
		_, err := tx.Exec(ctx, `
			INSERT INTO keyledger.records (operation_id, kind, step, target, attempt, uid, resource_version, digest, status, reason, batch, final, detail)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			id, string(r.Kind), r.Step, r.Target, attempt, r.UID, r.ResourceVersion, r.Digest, r.Status, r.Reason, batch, r.Final, r.Detail.JSON())
		require.NoError(t, err, "forging a %s record", r.Kind)
	}
	insert(store.Record{Kind: store.RecordPreparation, Step: "preparation", Digest: p.CommandDigest, UID: p.ExpectedUID, Detail: p.Detail})
	if state == store.StateCompleted {
		// Moved first: records of a finished operation are appended only
		// in the transaction that finished it.
		_, err = tx.Exec(ctx, `UPDATE keyledger.operations SET state = 'completed', outcome = 'completed' WHERE id = $1`, id)
		require.NoError(t, err)
		records = append(records, store.Record{Kind: store.RecordCompletion, Step: "complete", Status: "completed"})
	}
	for _, r := range records {
		insert(r)
	}
	if state != store.StateCompleted {
		_, err = tx.Exec(ctx, `UPDATE keyledger.operations SET state = $2 WHERE id = $1`, id, string(state))
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))
}

// forgeCompleted forges a completed operation for a command that never
// ran (forgeOperation).
func forgeCompleted(t *testing.T, url string, p store.PrepareParams, records ...store.Record) {
	t.Helper()
	forgeOperation(t, url, p, store.StateCompleted, records...)
}

// readCommand reads a command file as `keyledger run` does.
func readCommand(t *testing.T, path string) *command.File {
	t.Helper()
	f, err := command.Read(path, command.ReadOptions{})
	require.NoError(t, err)
	return f
}

// TestIntegrationReplayForgedRetirementRefused: a completed operation
// forged for a pending retirement (every field of its command is public)
// is not believed. The real run reads the keyring Secret, finds no receipt,
// refuses (exit 2, replay-receipt-missing) and writes nothing; plan says
// the same. The forged operation is final and stays as evidence (records
// are append-only, a final operation is never reopened): the retirement is
// done under a new mutationId, which retires the key with exactly one
// write, after which the forged operation's replay is contradicted by that
// receipt (another mutationId's) and still never reported existing.
func TestIntegrationReplayForgedRetirementRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := standardKeyring()
	s := e.createSecret(keyringSecret("forged-keyring", before))
	as := e.asRetirerOf(s)
	path := e.writeCommand("forged.json", retireCommand(s, "k-2026-07", "mut-forged"))
	cmd, err := retire.Decode(readCommand(t, path))
	require.NoError(t, err)

	forgeCompleted(t, e.runJournalURL(), store.PrepareParams{
		Kind: command.KindKeyRetirement, MutationID: "mut-forged", RequestID: "req-mut-forged", CommandDigest: cmd.Digest,
		Namespace: e.ns, Name: s.Name, ExpectedUID: string(s.UID),
		Detail: store.DetailOf(map[string]any{"keyId": "k-2026-07", "retirementId": "ret-mut-forged"}),
	})
	_, forged := e.journalOf("mut-forged")

	r := e.keyledger([]string{"run", path}, as)
	require.NotEqual(t, 0, r.Code, "a forged completion never exits 0: stdout %s", r.Stdout)
	out := requireRefused(t, r, retire.ReasonReplayReceiptMissing)
	require.Equal(t, "refused", out["outcome"])
	require.Equal(t, "mut-forged", out["mutationId"])
	require.Contains(t, r.Stdout, "no retirement receipt for key k-2026-07", "stdout names the missing receipt")
	require.Equal(t, 1, strings.Count(r.Stdout, "\n"), "one line on stdout")
	keyringtest.AssertNoMaterial(t, r.Stdout+r.Stderr, allMaterial()...)
	require.Equal(t, s.ResourceVersion, e.getSecret(s.Name).ResourceVersion, "the keyring Secret is untouched")

	p := e.plan(path, as)
	require.True(t, p.Replay)
	require.Equal(t, "refused", p.Outcome)
	require.Equal(t, retire.ReasonReplayReceiptMissing, p.Reason)
	require.Empty(t, p.Calls)
	require.Equal(t, s.ResourceVersion, e.getSecret(s.Name).ResourceVersion)
	_, after := e.journalOf("mut-forged")
	require.Equal(t, forged, after, "nothing is appended to the forged operation")

	// The same retirement under a new mutationId: one write.
	realPath := e.writeCommand("real.json", retireCommand(s, "k-2026-07", "mut-real"))
	r = e.keyledger([]string{"run", realPath}, as)
	requireOK(t, r, "completed")
	retired := e.getSecret(s.Name)
	requireRetired(t, retired, "k-2026-07", "mut-real", before)
	require.Equal(t, 1, e.secretWrites(s.Name, s.ResourceVersion, retired.ResourceVersion), "the key is retired by exactly one write")

	// The forged operation stays contradicted: the receipt is mut-real's.
	r = e.keyledger([]string{"run", path}, as)
	requireRefused(t, r, retire.ReasonReplayReceiptConflict)
	require.Equal(t, retired.ResourceVersion, e.getSecret(s.Name).ResourceVersion)
	op, after := e.journalOf("mut-forged")
	require.Equal(t, store.StateCompleted, op.State)
	require.Equal(t, forged, after)
}

// TestIntegrationReplayForgedSecretUpdateRefused: a completed SecretUpdate
// forged with the calls a run journals (an archive of version 1 and the
// write of version 2) is not believed while the cluster shows neither: the
// live Secret still at the command's resourceVersion (replay-live-unchanged),
// then moved by someone else but with its counter behind
// (replay-version-behind), then with its counter raised by hand but no
// archive (replay-snapshot-missing). Each run exits 2, creates no snapshot
// and leaves the live Secret as it was.
func TestIntegrationReplayForgedSecretUpdateRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	live := e.createSecret(plainSecret("db", map[string][]byte{"password": vCanary("old")}))
	as := e.asWriter("db")
	cmdFile := updateCommand(e.ns, "db", live.ResourceVersion, "mut-forged-u", map[string][]byte{"password": vCanary("new")})
	path := e.writeCommand("mut-forged-u.json", cmdFile)
	cmd, err := versioned.Decode(readCommand(t, path))
	require.NoError(t, err)

	snap := store.SecretTarget(e.ns, versioned.SnapshotName(live.UID, 1))
	uid, rv := string(live.UID), live.ResourceVersion
	forgeCompleted(t, e.runJournalURL(), store.PrepareParams{
		Kind: command.KindSecretUpdate, MutationID: "mut-forged-u", RequestID: "req-mut-forged-u", CommandDigest: cmd.Digest,
		Namespace: e.ns, Name: "db", Detail: store.DetailOf(map[string]any{"expectedResourceVersion": rv, "keys": []string{"password"}}),
	},
		store.Record{Kind: store.RecordObservation, Step: versioned.StepReadLive, UID: uid, ResourceVersion: rv},
		store.Record{Kind: store.RecordAuthorityCall, Step: versioned.StepCreateSnapshot, Target: snap, Attempt: 1, UID: uid, ResourceVersion: rv,
			Batch: 1, Detail: store.DetailOf(map[string]any{"version": 1, "nonce": "0123456789abcdef0123456789abcdef"})},
		store.Record{Kind: store.RecordAuthorityResult, Step: versioned.StepCreateSnapshot, Target: snap, UID: "00000000-0000-4000-8000-0000000f0e0d",
			ResourceVersion: "1", Status: "applied"},
		store.Record{Kind: store.RecordAuthorityCall, Step: versioned.StepReplaceLive, Target: store.SecretTarget(e.ns, "db"), Attempt: 1, UID: uid, ResourceVersion: rv,
			Batch: 2, Final: true, Detail: store.DetailOf(map[string]any{"version": 2})},
		store.Record{Kind: store.RecordAuthorityResult, Step: versioned.StepReplaceLive, Target: store.SecretTarget(e.ns, "db"), UID: uid, ResourceVersion: "2",
			Status: "applied"},
	)
	_, forged := e.journalOf("mut-forged-u")

	refused := func(reason string) {
		t.Helper()
		was := e.getSecret("db")
		r := e.keyledger([]string{"run", path}, as)
		requireRefused(t, r, reason)
		require.Equal(t, was.ResourceVersion, e.getSecret("db").ResourceVersion, "the live Secret is untouched")
		require.Empty(t, e.snapshotsOf(live.UID), "no snapshot is created")
		_, err := e.kube.Client().CoreV1().Secrets(e.ns).Get(t.Context(), versioned.SnapshotName(live.UID, 1), metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "the slot stays empty: %v", err)
		_, after := e.journalOf("mut-forged-u")
		require.Equal(t, forged, after, "nothing is appended to the forged operation")
		assertNoCanary(t, r.Stdout+r.Stderr, vCanary("old"), vCanary("new"))
	}
	byHand := func(change func(s *corev1.Secret)) {
		t.Helper()
		s := e.getSecret("db")
		change(s)
		_, err := e.kube.Client().CoreV1().Secrets(e.ns).Update(t.Context(), s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}

	refused(versioned.ReasonReplayLiveUnchanged)
	p := e.plan(path, asKubeconfig(e.retirers["writer:db"])) // asWriter picks identities for run only
	require.True(t, p.Replay)
	require.Equal(t, "refused", p.Outcome)
	require.Equal(t, versioned.ReasonReplayLiveUnchanged, p.Reason)

	byHand(func(s *corev1.Secret) { s.Labels = map[string]string{"touched": "yes"} })
	refused(versioned.ReasonReplayVersionBehind)

	byHand(func(s *corev1.Secret) { s.Annotations = map[string]string{versioned.AnnotationVersion: "2"} })
	refused(versioned.ReasonReplaySnapshotMissing)
}
