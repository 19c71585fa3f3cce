package versioned

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
)

// snapshotRecords are the records of one create-snapshot call on version n
// of live UID uid, answered with snapshot UID answer ("" when the answer
// was lost), carrying nonce.
func snapshotRecords(uid types.UID, n int64, nonce string, answer types.UID) []store.Record {
	target := store.SecretTarget(testNamespace, SnapshotName(uid, n))
	out := []store.Record{{Kind: store.RecordAuthorityCall, Step: StepCreateSnapshot, Target: target, UID: string(uid),
		Detail: store.DetailOf(map[string]any{"nonce": nonce})}}
	if answer != "" {
		out = append(out, store.Record{Kind: store.RecordAuthorityResult, Step: StepCreateSnapshot, Target: target,
			UID: string(answer), Status: workflow.Applied})
	}
	return out
}

func metaOf(s *corev1.Secret) metav1.PartialObjectMetadata {
	return metav1.PartialObjectMetadata{ObjectMeta: *s.ObjectMeta.DeepCopy()}
}

// Only an object whose UID the journal holds as the answer of a create in
// that very slot is history; the rest is foreign, whatever it looks like.
func TestProvenanceClassifies(t *testing.T) {
	t.Parallel()
	live := liveSecret()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	snap := func(n int64, uid types.UID, nonce string) *corev1.Secret {
		s := snapshotOf(live, n, at, "req/mut")
		s.UID, s.ResourceVersion = uid, "9"
		if nonce != "" {
			s.Annotations[AnnotationNonce] = nonce
		}
		return s
	}
	p := newProvenance()
	p.add(append(snapshotRecords(live.UID, 1, "n1", "s-1"), snapshotRecords(live.UID, 2, "n2", "")...), live.UID)
	// A call bound to another live UID proves nothing for this one.
	p.add(snapshotRecords("uid-other", 4, "n4", "s-4"), live.UID)
	// An ours resolution journals the UID too.
	p.add([]store.Record{
		snapshotRecords(live.UID, 5, "n5", "")[0],
		{Kind: store.RecordResolution, Step: StepCreateSnapshot, Target: store.SecretTarget(testNamespace, SnapshotName(live.UID, 5)), UID: "s-5", Status: workflow.Ours},
	}, live.UID)

	edited := snap(6, "s-6", "")
	edited.Annotations["x"] = "y"
	p.add(snapshotRecords(live.UID, 6, "n6", "s-6"), live.UID)
	wrongSlot := snap(7, "s-1", "") // a journaled UID, but not the one created in this slot
	unlabelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SnapshotName(live.UID, 8), UID: "x-8"}}
	labelOnly := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "lookalike", UID: "x-9", Labels: map[string]string{LabelSourceUID: Hash(string(live.UID))}}}
	unrelated := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", UID: live.UID}}

	metas := []metav1.PartialObjectMetadata{
		metaOf(snap(1, "s-1", "n1")), metaOf(snap(2, "s-2", "n2")), metaOf(snap(3, "s-3", "n3")),
		metaOf(snap(4, "s-4", "n4")), metaOf(snap(5, "s-5", "")), metaOf(edited), metaOf(wrongSlot),
		metaOf(unlabelled), metaOf(labelOnly), metaOf(unrelated),
	}
	inv := classify(metas, live, p)
	var versions []int64
	for _, s := range inv.genuine {
		versions = append(versions, s.Version)
	}
	require.Equal(t, []int64{1, 5}, versions)
	reasons := map[string]string{}
	for _, o := range inv.foreign {
		reasons[o.Name] = o.Reason
	}
	require.Equal(t, map[string]string{
		SnapshotName(live.UID, 2): ForeignUnsettled,
		SnapshotName(live.UID, 3): ForeignNotJournaled,
		SnapshotName(live.UID, 4): ForeignNotJournaled,
		SnapshotName(live.UID, 6): ForeignEdited,
		SnapshotName(live.UID, 7): ForeignNotJournaled,
		SnapshotName(live.UID, 8): ForeignNotJournaled,
		"lookalike":               ForeignNotJournaled,
	}, reasons)
	o, ok := inv.foreignAt(8)
	require.True(t, ok)
	require.Equal(t, int64(8), o.Version)
}

// A version slot at or above the live counter held by anything not ours
// blocks the write; keyledger's own history above the counter too.
func TestCheckSlots(t *testing.T) {
	t.Parallel()
	live := liveSecret() // version 3
	f := &family{cmd: &Command{Kind: command.KindSecretUpdate, Namespace: "shop", Name: "db"}}
	for _, tc := range []struct {
		name string
		inv  inventory
		want string
	}{
		{"empty", inventory{}, ""},
		{"foreign below", inventory{foreign: []Foreign{{Name: "a", Version: 2, Reason: ForeignNotJournaled}}}, ""},
		{"foreign without slot", inventory{foreign: []Foreign{{Name: "a", Reason: ForeignNotJournaled}}}, ""},
		{"foreign at", inventory{foreign: []Foreign{{Name: "a", Version: 3, Reason: ForeignNotJournaled}}}, ReasonSlotOccupied},
		{"foreign above", inventory{foreign: []Foreign{{Name: "a", Version: 30, Reason: ForeignNotJournaled}}}, ReasonSlotOccupied},
		{"edited above", inventory{foreign: []Foreign{{Name: "a", Version: 4, Reason: ForeignEdited}}}, ReasonSlotOccupied},
		{"unsettled at", inventory{foreign: []Foreign{{Name: "a", Version: 3, Reason: ForeignUnsettled}}}, ""},
		{"unsettled above", inventory{foreign: []Foreign{{Name: "a", Version: 4, Reason: ForeignUnsettled}}}, ReasonCounterBehind},
		{"genuine at", inventory{genuine: []Snapshot{{Version: 3}}}, ""},
		{"genuine above", inventory{genuine: []Snapshot{{Version: 2}, {Version: 4}}}, ReasonCounterBehind},
	} {
		d, blocked := f.checkSlots(live, tc.inv, 3)
		if tc.want == "" {
			require.False(t, blocked, tc.name)
			continue
		}
		require.True(t, blocked, tc.name)
		require.Equal(t, tc.want, d.Refuse.Reason, tc.name)
	}
}

// The archive behind the live write is the one this operation settled,
// present and final.
func TestArchiveProblem(t *testing.T) {
	t.Parallel()
	rec := store.Record{UID: "s-3"}
	require.Equal(t, ReasonArchiveMissing, archiveProblem(inventory{}, 3, rec))
	require.Equal(t, ReasonArchiveMissing, archiveProblem(inventory{genuine: []Snapshot{{Version: 3, UID: "s-other"}}}, 3, rec))
	require.Equal(t, ReasonSnapshotTerminating, archiveProblem(inventory{genuine: []Snapshot{{Version: 3, UID: "s-3", Terminating: true}}}, 3, rec))
	require.Equal(t, ReasonSnapshotFinalizers, archiveProblem(inventory{genuine: []Snapshot{{Version: 3, UID: "s-3", Finalizers: 1}}}, 3, rec))
	require.Empty(t, archiveProblem(inventory{genuine: []Snapshot{{Version: 3, UID: "s-3"}}}, 3, rec))
}

// The largest SecretUpdate (MaxUpdateKeys keys, names of the longest valid
// length) decodes, and its preparation detail fits the journal's 16 KiB
// limit; one key more is refused naming the limit, before any verifier.
func TestUpdateKeyBound(t *testing.T) {
	t.Parallel()
	spec := func(keys int) string {
		data := map[string]string{}
		for i := range keys {
			name := fmt.Sprintf("k%03d-", i) + strings.Repeat("x", 253-5)
			data[name] = base64.StdEncoding.EncodeToString([]byte(fmt.Sprint("v", i)))
		}
		b, _ := json.Marshal(map[string]any{"namespace": "shop", "name": "db", "expectedResourceVersion": strings.Repeat("9", 128), "data": data})
		return string(b)
	}
	cmd, err := Decode(writeCommand(t, envelope(command.KindSecretUpdate, spec(MaxUpdateKeys)), 0o600))
	require.NoError(t, err)
	detail, err := json.Marshal(prepareDetail(cmd))
	require.NoError(t, err)
	require.LessOrEqual(t, len(detail), 16384, "the preparation record fits the journal")

	_, err = Decode(writeCommand(t, envelope(command.KindSecretUpdate, spec(MaxUpdateKeys+1)), 0o600))
	var invalid *command.InvalidError
	require.ErrorAs(t, err, &invalid)
	require.Contains(t, err.Error(), fmt.Sprintf("at most %d keys", MaxUpdateKeys))
}

// Raw restores and updates that bring no new bytes are measured as the API
// server measures them; new data by the estimate.
func TestSizeBounds(t *testing.T) {
	t.Parallel()
	blob := map[string][]byte{"blob": make([]byte, 800<<10), "small": []byte("s")}
	require.Greater(t, EstimateSize(&corev1.Secret{Data: blob}), int64(MaxSecretBytes), "over the estimate")
	require.LessOrEqual(t, DataSize(blob), int64(MaxSecretBytes), "within what the API server counts")
	require.True(t, preservesData(blob, map[string][]byte{"blob": blob["blob"]}), "removing a key brings no new bytes")
	require.True(t, preservesData(blob, blob))
	require.False(t, preservesData(blob, map[string][]byte{"blob": blob["blob"], "small": []byte("t")}))
	require.False(t, preservesData(blob, map[string][]byte{"new": nil}))
}

// A keyledger write never keeps kubectl's last-applied copy of the values.
func TestReplacementDropsLastApplied(t *testing.T) {
	t.Parallel()
	live := liveSecret()
	live.Annotations[AnnotationLastApplied] = `{"data":{"tls.crt":"` + base64.StdEncoding.EncodeToString([]byte(canary)) + `"}}`
	f := &family{cmd: &Command{Kind: command.KindSecretUpdate, Data: map[string][]byte{"tls.crt": []byte("new")}}}
	out := f.replacement(live, live.Data, 3)
	require.NotContains(t, out.Annotations, AnnotationLastApplied)
	require.Equal(t, "x", out.Annotations["controller.example/owner"])
	require.Contains(t, live.Annotations, AnnotationLastApplied, "the read object is not modified")
	require.NotContains(t, snapshotOf(live, 3, time.Now(), "r/m").Annotations, AnnotationLastApplied)
}
