package integration

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// setVersion moves the live counter by hand, as an operator would.
func setVersion(e *env, name, version string) *corev1.Secret {
	e.T.Helper()
	cur := e.GetSecret(name)
	cur.Annotations["keyledger.dev/version"] = version
	out, err := e.Kube.Client().CoreV1().Secrets(e.NS).Update(e.T.Context(), cur, metav1.UpdateOptions{})
	require.NoError(e.T, err)
	return out
}

// An archive whose create answer was lost is accepted only if nothing holds
// or deletes it: a finalizer, or a deletion in progress, blocks the live
// write (exit 2, its own reason).
func TestIntegrationVersionedHeldOccupantBlocks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("fin", "term")
	for _, tc := range []struct{ name, reason string }{{"fin", "snapshot-finalizers"}, {"term", "snapshot-terminating"}} {
		t.Run(tc.name, func(t *testing.T) {
			s := e.CreateSecret(suite.PlainSecret(tc.name, map[string][]byte{"k": suite.VCanary("0")}))
			cmd := suite.UpdateCommand(e.NS, tc.name, s.ResourceVersion, "mut-"+tc.name, map[string][]byte{"k": suite.VCanary("1")})
			r := e.RunCmd(cmd, as, suite.WithFailpoint("after-send#1")) // the snapshot exists, its answer is not journaled
			require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)
			snap := versioned.SnapshotName(s.UID, 1)
			e.AddFinalizer(snap)
			if tc.name == "term" {
				require.NoError(t, e.Kube.Client().CoreV1().Secrets(e.NS).Delete(t.Context(), snap, metav1.DeleteOptions{}))
			}
			suite.RequireRefused(t, e.RunCmd(cmd, as), tc.reason)
			require.Equal(t, s.ResourceVersion, e.GetSecret(tc.name).ResourceVersion, "the live write is blocked")
		})
	}
}

// The archive is checked again on a rerun: one deleted after its create was
// journaled blocks the live write (archive-missing); keyledger does not
// re-create it.
func TestIntegrationVersionedMissingArchiveBlocks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("gone")
	s := e.CreateSecret(suite.PlainSecret("gone", map[string][]byte{"k": suite.VCanary("0")}))
	cmd := suite.UpdateCommand(e.NS, "gone", s.ResourceVersion, "mut-gone", map[string][]byte{"k": suite.VCanary("1")})
	r := e.RunCmd(cmd, as, suite.WithFailpoint("after-answer#1"))
	require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.NoError(t, e.Kube.Client().CoreV1().Secrets(e.NS).Delete(t.Context(), versioned.SnapshotName(s.UID, 1), metav1.DeleteOptions{}))
	suite.RequireRefused(t, e.RunCmd(cmd, as), "archive-missing")
	require.Equal(t, s.ResourceVersion, e.GetSecret("gone").ResourceVersion)
	require.Empty(t, e.SnapshotsOf(s.UID), "not re-created")
}

// A live counter moved back behind keyledger's own retained history is
// refused (counter-behind, exit 2) before anything is written, even where
// the slot it names is free.
func TestIntegrationVersionedCounterBehind(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("back")
	limit := suite.WithEnv("KEYLEDGER_HISTORY_LIMIT=2")
	s := e.CreateSecret(suite.PlainSecret("back", map[string][]byte{"k": suite.VCanary("0")}))
	for i := 1; i <= 3; i++ {
		suite.RequireOK(t, e.Update("back", fmt.Sprint("mut-b", i), suite.VCanary(fmt.Sprint(i)), as, limit), "completed")
	}
	before := e.ObjectsOf(s.UID)
	require.Len(t, before, 2, "v2 and v3")
	moved := setVersion(e, "back", "1") // slot v1 is free: retention freed it
	out := suite.RequireRefused(t, e.Update("back", "mut-b4", suite.VCanary("4"), as, limit), "counter-behind")
	require.EqualValues(t, 3, out["newestVersion"])
	require.Equal(t, moved.ResourceVersion, e.GetSecret("back").ResourceVersion)
	require.Equal(t, before, e.ObjectsOf(s.UID), "history untouched")

	// Moved back onto keyledger's newest snapshot: that slot holds another
	// source state (source-conflict), and nothing is written.
	moved = setVersion(e, "back", "3")
	suite.RequireRefused(t, e.Update("back", "mut-b5", suite.VCanary("5"), as, limit), "source-conflict")
	require.Equal(t, moved.ResourceVersion, e.GetSecret("back").ResourceVersion)
	require.Equal(t, before, e.ObjectsOf(s.UID), "history untouched")
}

// A delete keeping history touches no snapshot: none created, none deleted.
func TestIntegrationVersionedDeleteKeepsHistoryUntouched(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("keep")
	limit := suite.WithEnv("KEYLEDGER_HISTORY_LIMIT=1")
	s := e.CreateSecret(suite.PlainSecret("keep", map[string][]byte{"k": suite.VCanary("0")}))
	suite.RequireOK(t, e.Update("keep", "mut-k1", suite.VCanary("1"), as, limit), "completed")
	suite.RequireOK(t, e.Update("keep", "mut-k2", suite.VCanary("2"), as, limit), "completed")
	before := e.ObjectsOf(s.UID)
	require.Len(t, before, 1)
	cur := e.GetSecret("keep")
	out := suite.RequireOK(t, e.RunCmd(suite.DeleteCommand(e.NS, "keep", cur.ResourceVersion, "mut-kdel", true), as, limit), "deleted")
	require.Equal(t, "kept", out["history"])
	require.Equal(t, before, e.ObjectsOf(s.UID), "the same snapshots, unchanged")
	_, records := e.JournalOf("mut-kdel")
	var steps []string
	for _, rec := range records {
		if rec.Kind == store.RecordAuthorityCall {
			steps = append(steps, rec.Step)
		}
	}
	require.Equal(t, []string{"delete-live"}, steps)
}

// A cleanup delete the API server refuses (an admission policy) leaves the
// operation open: exit 75, and the same command rerun retries it and
// completes. (Pending cleanups: TestIntegrationVersionedRetention.)
func TestIntegrationVersionedFailedCleanupRetries(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("prune", "purge")
	limit := suite.WithEnv("KEYLEDGER_HISTORY_LIMIT=1")

	s := e.CreateSecret(suite.PlainSecret("prune", map[string][]byte{"k": suite.VCanary("0")}))
	suite.RequireOK(t, e.Update("prune", "mut-p1", suite.VCanary("1"), as, limit), "completed")
	lift := e.DenyDelete(versioned.SnapshotName(s.UID, 1))
	before := e.GetSecret("prune")
	cmd := suite.UpdateCommand(e.NS, "prune", before.ResourceVersion, "mut-p2", map[string][]byte{"k": suite.VCanary("2")})
	r := e.RunCmd(cmd, as, limit)
	require.Equal(t, 75, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, before.ResourceVersion, e.GetSecret("prune").ResourceVersion, "the live write waits")
	op, _ := e.JournalOf("mut-p2")
	require.False(t, op.State.Terminal(), "the operation stays open")
	lift()
	suite.RequireOK(t, e.RunCmd(cmd, as, limit), "completed")
	require.Equal(t, []string{"2"}, e.VersionsOf(s.UID))
	require.Equal(t, suite.VCanary("2"), e.GetSecret("prune").Data["k"])

	p := e.CreateSecret(suite.PlainSecret("purge", map[string][]byte{"k": suite.VCanary("0")}))
	suite.RequireOK(t, e.Update("purge", "mut-q1", suite.VCanary("1"), as), "completed")
	lift = e.DenyDelete(versioned.SnapshotName(p.UID, 1))
	cur := e.GetSecret("purge")
	del := suite.DeleteCommand(e.NS, "purge", cur.ResourceVersion, "mut-qdel", false)
	r = e.RunCmd(del, as)
	require.Equal(t, 75, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, cur.ResourceVersion, e.GetSecret("purge").ResourceVersion, "the live delete waits")
	lift()
	suite.RequireOK(t, e.RunCmd(del, as), "deleted")
	require.Empty(t, e.SnapshotsOf(p.UID))
}

// Restores and updates that bring no new bytes are bounded by what the API
// server counts (raw keys and values), not by the contract's estimate; new
// data is (UTF-8 bytes x 1.4 against 1 MiB). 760 KiB of values are under
// 1 MiB as base64 (x 4/3) but over it at x 1.4: an update bringing new data
// exits 64 before the journal is contacted, while the restore of a snapshot
// of the same decoded size proceeds.
func TestIntegrationVersionedSizeBounds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("large")
	blob := make([]byte, 760<<10) // 760 KiB raw: about 1.04 MiB at x 1.4, 0.99 MiB as base64
	for i := range blob {
		blob[i] = byte(i)
	}
	s := e.CreateSecret(suite.PlainSecret("large", map[string][]byte{"blob": blob, "small": suite.VCanary("s")}))

	// New data over the estimate: exit 64, no journal connection, nothing written.
	url, connections := suite.PGListener(t)
	r := e.RunCmd(suite.UpdateCommand(e.NS, "large", s.ResourceVersion, "mut-l0", map[string][]byte{"new": suite.VCanary("n")}), as, suite.WithDatabase(url))
	require.Equal(t, 64, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Contains(t, suite.Outcome(t, r)["error"], "x 1.4")
	require.Zero(t, connections.Load(), "the journal is never contacted")
	require.Equal(t, s.ResourceVersion, e.GetSecret("large").ResourceVersion)
	require.Empty(t, e.SnapshotsOf(s.UID))
	suite.AssertNoCanary(t, r.Stdout+r.Stderr, suite.VCanary("s"), suite.VCanary("n"))

	// Removing a key brings no new bytes: accepted.
	suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "large", s.ResourceVersion, "mut-l1", nil, "small"), as), "completed")
	v2 := e.GetSecret("large")
	require.Equal(t, map[string][]byte{"blob": blob}, v2.Data)
	// Restoring version 1 (760 KiB and the small key, raw): accepted, byte for byte.
	suite.RequireOK(t, e.RunCmd(suite.RestoreCommand(e.NS, "large", v2.ResourceVersion, "mut-l2", 1), as), "completed")
	require.Equal(t, s.Data, e.GetSecret("large").Data)
}

// A keyledger write leaves no kubectl last-applied copy of the old values,
// says so in its outcome, and snapshots never carry it. history --show-keys
// shows which values are equal without any digest testable offline.
func TestIntegrationVersionedNothingGuessable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("app")
	old, next := suite.VCanary("old"), suite.VCanary("next")
	applied := suite.PlainSecret("app", map[string][]byte{"password": old, "user": []byte("app")})
	lastApplied, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "app"},
		"data": map[string]string{"password": base64.StdEncoding.EncodeToString(old), "user": base64.StdEncoding.EncodeToString([]byte("app"))}})
	require.NoError(t, err)
	applied.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(lastApplied)}
	s := e.CreateSecret(applied)

	r := e.RunCmd(suite.UpdateCommand(e.NS, "app", s.ResourceVersion, "mut-a1", map[string][]byte{"password": next}), as)
	out := suite.RequireOK(t, r, "completed")
	require.Equal(t, []any{"kubectl.kubernetes.io/last-applied-configuration"}, out["droppedAnnotations"])
	live := e.GetSecret("app")
	require.NotContains(t, live.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
	for k, v := range live.Annotations {
		suite.AssertNoCanary(t, k+"="+v, old)
	}
	snap := e.RequireSnapshot(s, 1, "mut-a1")
	require.NotContains(t, snap.Annotations, "kubectl.kubernetes.io/last-applied-configuration")

	// Restore v1: the live password is old again.
	suite.RequireOK(t, e.RunCmd(suite.RestoreCommand(e.NS, "app", live.ResourceVersion, "mut-a2", 1), as), "completed")
	show := func() (versioned.History, string) {
		h := e.Keyledger([]string{"history", e.NS + "/app", "--show-keys", "-o", "json"}, as)
		require.Equal(t, 0, h.Code, "%s %s", h.Stdout, h.Stderr)
		var hist versioned.History
		require.NoError(t, json.Unmarshal([]byte(h.Stdout), &hist))
		return hist, h.Stdout + h.Stderr
	}
	digest := func(keys []versioned.KeyInfo, name string) string {
		for _, k := range keys {
			if k.Name == name {
				require.True(t, strings.HasPrefix(k.Digest, "hmac-sha256:"), k.Digest)
				return k.Digest
			}
		}
		t.Fatalf("no key %s", name)
		return ""
	}
	h1, text1 := show()
	require.Equal(t, []int64{1, 2}, historyVersions(h1))
	require.Equal(t, digest(h1.Live, "password"), digest(h1.Versions[0].Keys, "password"), "the live value is version 1's")
	require.NotEqual(t, digest(h1.Live, "password"), digest(h1.Versions[1].Keys, "password"), "version 2's differs")
	require.Equal(t, digest(h1.Versions[0].Keys, "user"), digest(h1.Versions[1].Keys, "user"))
	h2, text2 := show()
	require.NotEqual(t, digest(h1.Live, "password"), digest(h2.Live, "password"), "keyed per invocation: not comparable across runs")
	table := e.Keyledger([]string{"history", e.NS + "/app", "--version", "2", "--show-keys"}, as)
	require.Equal(t, 0, table.Code, table.Stderr)
	for _, text := range []string{text1, text2, table.Stdout + table.Stderr} {
		suite.AssertNoCanary(t, text, old, next)
		for _, v := range [][]byte{old, next, []byte("app")} {
			sum := sha256.Sum256(v)
			require.NotContains(t, text, hex.EncodeToString(sum[:]), "no plain SHA-256 of any value")
		}
	}
}

// The largest valid SecretUpdate decodes (its verifier work is bounded:
// `make bench` prints the CPU it takes), runs and completes, so every record
// it produces fits the journal; one key more is refused with exit 64 naming
// the limit, before PostgreSQL is contacted.
func TestIntegrationVersionedLargestUpdate(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("wide")
	s := e.CreateSecret(suite.PlainSecret("wide", map[string][]byte{"k": suite.VCanary("0")}))

	url, connections := suite.PGListener(t)
	over, _ := suite.MaximalUpdate(e.NS, "wide", s.ResourceVersion, "mut-over", 1)
	r := e.RunCmd(over, as, suite.WithDatabase(url))
	require.Equal(t, 64, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Contains(t, suite.Outcome(t, r)["error"], fmt.Sprintf("at most %d keys", versioned.MaxUpdateKeys))
	require.Zero(t, connections.Load())

	cmd, data := suite.MaximalUpdate(e.NS, "wide", s.ResourceVersion, "mut-wide", 0)
	path := e.WriteCommand("mut-wide.json", cmd)
	require.Len(t, data, versioned.MaxUpdateKeys)
	r = e.Keyledger([]string{"run", path}, as)
	suite.RequireOK(t, r, "completed")
	live := e.GetSecret("wide")
	require.Len(t, live.Data, versioned.MaxUpdateKeys+1)
	for k, v := range data {
		require.Equal(t, v, live.Data[k])
	}
	op, records := e.JournalOf("mut-wide")
	require.Equal(t, store.StateCompleted, op.State)
	require.NotZero(t, suite.Count(records, store.RecordPreparation))
}
