package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/retire"
	"github.com/keyledger/keyledger/workflow/retire/keyring/keyringtest"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// forgeCompleted forges a completed operation for a command that never
// ran (ForgeOperation).
func forgeCompleted(t *testing.T, url string, p store.PrepareParams, records ...store.Record) {
	t.Helper()
	suite.ForgeOperation(t, url, p, store.StateCompleted, records...)
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
	before := suite.StandardKeyring()
	s := e.CreateSecret(suite.KeyringSecret("forged-keyring", before))
	as := e.AsRetirerOf(s)
	path := e.WriteCommand("forged.json", suite.RetireCommand(s, "k-2026-07", "mut-forged"))
	cmd, err := retire.Decode(suite.ReadCommand(t, path))
	require.NoError(t, err)

	forgeCompleted(t, e.RunJournalURL(), store.PrepareParams{
		Kind: command.KindKeyRetirement, MutationID: "mut-forged", RequestID: "req-mut-forged", CommandDigest: cmd.Digest,
		Namespace: e.NS, Name: s.Name, ExpectedUID: string(s.UID),
		Detail: store.DetailOf(map[string]any{"keyId": "k-2026-07", "retirementId": "ret-mut-forged"}),
	})
	_, forged := e.JournalOf("mut-forged")

	r := e.Keyledger([]string{"run", path}, as)
	require.NotEqual(t, 0, r.Code, "a forged completion never exits 0: stdout %s", r.Stdout)
	out := suite.RequireRefused(t, r, retire.ReasonReplayReceiptMissing)
	require.Equal(t, "refused", out["outcome"])
	require.Equal(t, "mut-forged", out["mutationId"])
	require.Contains(t, r.Stdout, "no retirement receipt for key k-2026-07", "stdout names the missing receipt")
	require.Equal(t, 1, strings.Count(r.Stdout, "\n"), "one line on stdout")
	keyringtest.AssertNoMaterial(t, r.Stdout+r.Stderr, suite.AllMaterial()...)
	require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion, "the keyring Secret is untouched")

	p := e.Plan(path, as)
	require.True(t, p.Replay)
	require.Equal(t, "refused", p.Outcome)
	require.Equal(t, retire.ReasonReplayReceiptMissing, p.Reason)
	require.Empty(t, p.Calls)
	require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion)
	_, after := e.JournalOf("mut-forged")
	require.Equal(t, forged, after, "nothing is appended to the forged operation")

	// The same retirement under a new mutationId: one write.
	realPath := e.WriteCommand("real.json", suite.RetireCommand(s, "k-2026-07", "mut-real"))
	r = e.Keyledger([]string{"run", realPath}, as)
	suite.RequireOK(t, r, "completed")
	retired := e.GetSecret(s.Name)
	suite.RequireRetired(t, retired, "k-2026-07", "mut-real", before)
	require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, retired.ResourceVersion), "the key is retired by exactly one write")

	// The forged operation stays contradicted: the receipt is mut-real's.
	r = e.Keyledger([]string{"run", path}, as)
	suite.RequireRefused(t, r, retire.ReasonReplayReceiptConflict)
	require.Equal(t, retired.ResourceVersion, e.GetSecret(s.Name).ResourceVersion)
	op, after := e.JournalOf("mut-forged")
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
	live := e.CreateSecret(suite.PlainSecret("db", map[string][]byte{"password": suite.VCanary("old")}))
	as := e.AsWriter("db")
	cmdFile := suite.UpdateCommand(e.NS, "db", live.ResourceVersion, "mut-forged-u", map[string][]byte{"password": suite.VCanary("new")})
	path := e.WriteCommand("mut-forged-u.json", cmdFile)
	cmd, err := versioned.Decode(suite.ReadCommand(t, path))
	require.NoError(t, err)

	snap := store.SecretTarget(e.NS, versioned.SnapshotName(live.UID, 1))
	uid, rv := string(live.UID), live.ResourceVersion
	forgeCompleted(t, e.RunJournalURL(), store.PrepareParams{
		Kind: command.KindSecretUpdate, MutationID: "mut-forged-u", RequestID: "req-mut-forged-u", CommandDigest: cmd.Digest,
		Namespace: e.NS, Name: "db", Detail: store.DetailOf(map[string]any{"expectedResourceVersion": rv, "keys": []string{"password"}}),
	},
		store.Record{Kind: store.RecordObservation, Step: versioned.StepReadLive, UID: uid, ResourceVersion: rv},
		store.Record{Kind: store.RecordAuthorityCall, Step: versioned.StepCreateSnapshot, Target: snap, Attempt: 1, UID: uid, ResourceVersion: rv,
			Batch: 1, Detail: store.DetailOf(map[string]any{"version": 1, "nonce": "0123456789abcdef0123456789abcdef"})},
		store.Record{Kind: store.RecordAuthorityResult, Step: versioned.StepCreateSnapshot, Target: snap, UID: "00000000-0000-4000-8000-0000000f0e0d",
			ResourceVersion: "1", Status: "applied"},
		store.Record{Kind: store.RecordAuthorityCall, Step: versioned.StepReplaceLive, Target: store.SecretTarget(e.NS, "db"), Attempt: 1, UID: uid, ResourceVersion: rv,
			Batch: 2, Final: true, Detail: store.DetailOf(map[string]any{"version": 2})},
		store.Record{Kind: store.RecordAuthorityResult, Step: versioned.StepReplaceLive, Target: store.SecretTarget(e.NS, "db"), UID: uid, ResourceVersion: "2",
			Status: "applied"},
	)
	_, forged := e.JournalOf("mut-forged-u")

	refused := func(reason string) {
		t.Helper()
		was := e.GetSecret("db")
		r := e.Keyledger([]string{"run", path}, as)
		suite.RequireRefused(t, r, reason)
		require.Equal(t, was.ResourceVersion, e.GetSecret("db").ResourceVersion, "the live Secret is untouched")
		require.Empty(t, e.SnapshotsOf(live.UID), "no snapshot is created")
		_, err := e.Kube.Client().CoreV1().Secrets(e.NS).Get(t.Context(), versioned.SnapshotName(live.UID, 1), metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "the slot stays empty: %v", err)
		_, after := e.JournalOf("mut-forged-u")
		require.Equal(t, forged, after, "nothing is appended to the forged operation")
		suite.AssertNoCanary(t, r.Stdout+r.Stderr, suite.VCanary("old"), suite.VCanary("new"))
	}
	byHand := func(change func(s *corev1.Secret)) {
		t.Helper()
		s := e.GetSecret("db")
		change(s)
		_, err := e.Kube.Client().CoreV1().Secrets(e.NS).Update(t.Context(), s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}

	refused(versioned.ReasonReplayLiveUnchanged)
	p := e.Plan(path, suite.AsKubeconfig(e.Retirers["writer:db"])) // asWriter picks identities for run only
	require.True(t, p.Replay)
	require.Equal(t, "refused", p.Outcome)
	require.Equal(t, versioned.ReasonReplayLiveUnchanged, p.Reason)

	byHand(func(s *corev1.Secret) { s.Labels = map[string]string{"touched": "yes"} })
	refused(versioned.ReasonReplayVersionBehind)

	byHand(func(s *corev1.Secret) { s.Annotations = map[string]string{versioned.AnnotationVersion: "2"} })
	refused(versioned.ReasonReplaySnapshotMissing)
}

// TestIntegrationReplayUnreadableRecordNamed: a record the namespace's own
// journal role writes around keyledger, with a target keyledger never
// writes, is not acted on and is not a bug of keyledger's: resuming the
// unfinished retirement it was written into stops with
// journal-record-unreadable, exit 75 (the preparation is durable), naming
// the record and never its text, and the keyring Secret is untouched; the
// retirement under a new mutationId then retires the key with one write.
func TestIntegrationReplayUnreadableRecordNamed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.CreateSecret(suite.KeyringSecret("unreadable-keyring", suite.StandardKeyring()))
	as := e.AsRetirerOf(s)
	path := e.WriteCommand("unreadable.json", suite.RetireCommand(s, "k-2026-07", "mut-unreadable"))
	cmd, err := retire.Decode(suite.ReadCommand(t, path))
	require.NoError(t, err)
	suite.ForgeOperation(t, e.RunJournalURL(), store.PrepareParams{
		Kind: command.KindKeyRetirement, MutationID: "mut-unreadable", RequestID: "req-mut-unreadable", CommandDigest: cmd.Digest,
		Namespace: e.NS, Name: s.Name, ExpectedUID: string(s.UID),
		Detail: store.DetailOf(map[string]any{"keyId": "k-2026-07", "retirementId": "ret-mut-unreadable"}),
	}, store.StateCalling)
	op, _ := e.JournalOf("mut-unreadable")

	const forgedText = "secret-canary-unreadable-target"
	var forged int64
	require.NoError(t, suite.Connect(t, e.RunJournalURL()).QueryRow(t.Context(),
		`INSERT INTO keyledger.records (operation_id, kind, step, target) VALUES ($1, 'observation', 'read-keyring', $2) RETURNING id`,
		op.ID, forgedText).Scan(&forged))

	r := e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 75, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stderr, "journal-record-unreadable")
	require.Contains(t, r.Stderr, fmt.Sprintf("record %d target", forged), "the error names the record")
	require.NotContains(t, r.Stdout+r.Stderr, forgedText, "never the record's text")
	require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion, "the keyring Secret is untouched")

	// What docs/failures.md says to do: the same retirement under a new
	// mutationId retires the key with exactly one write.
	realPath := e.WriteCommand("unreadable-real.json", suite.RetireCommand(s, "k-2026-07", "mut-unreadable-real"))
	suite.RequireOK(t, e.Keyledger([]string{"run", realPath}, as), "completed")
	retired := e.GetSecret(s.Name)
	require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, retired.ResourceVersion), "the key is retired by exactly one write")
}
