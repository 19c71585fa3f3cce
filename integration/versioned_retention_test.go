package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// metadataOnly is the Accept header of a read that returns no data.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// snapshotReads are the GETs of snapshot Secrets among reqs.
func snapshotReads(reqs []suite.APIRequest) []suite.APIRequest {
	var out []suite.APIRequest
	for _, r := range reqs {
		if r.Method == http.MethodGet && strings.Contains(r.Path, "/secrets/"+kube.SnapshotPrefix) {
			out = append(out, r)
		}
	}
	return out
}

// A lost prune answer is settled from the snapshot's metadata alone: every
// read of a snapshot the rerun makes, as the request recorder on the real
// transport saw it, asked for PartialObjectMetadata and got no data back,
// whether the delete had taken effect (lost answer) or had not been sent
// (the call journaled, then the process died).
func TestIntegrationVersionedCleanupReadsMetadataOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := newAPIRecorder(e)
	for _, tc := range []struct{ name, failpoint string }{
		{"lost", "after-send#2"}, // create-snapshot is #1, prune-snapshot #2: applied, its answer not journaled
		{"unsent", "after-call#2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := rec.through(e, "proxied-"+tc.name, suite.VersionedRules(tc.name))
			limit := suite.WithEnv("KEYLEDGER_HISTORY_LIMIT=1")
			s := e.CreateSecret(suite.PlainSecret(tc.name, map[string][]byte{"k": suite.VCanary("0")}))
			suite.RequireOK(t, e.Update(tc.name, "mut-"+tc.name+"-1", suite.VCanary("1"), as, limit), "completed")
			cmd := suite.UpdateCommand(e.NS, tc.name, e.GetSecret(tc.name).ResourceVersion, "mut-"+tc.name+"-2", map[string][]byte{"k": suite.VCanary("2")})
			r := e.RunCmd(cmd, as, limit, suite.WithFailpoint(tc.failpoint))
			require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)

			rec.reset(nil)
			suite.RequireOK(t, e.RunCmd(cmd, as, limit), "completed")
			reads := snapshotReads(rec.requests())
			pruned := versioned.SnapshotName(s.UID, 1)
			settled := false
			for _, r := range reads {
				require.Equal(t, metadataOnly, r.Accept, "%s %s", r.Method, r.Path)
				require.False(t, r.HasData, "%s %s", r.Method, r.Path)
				require.Contains(t, []string{"PartialObjectMetadata", "Status"}, r.Kind, "%s %s", r.Method, r.Path)
				settled = settled || strings.HasSuffix(r.Path, "/"+pruned)
			}
			require.True(t, settled, "the pruned snapshot was read to settle its delete: %v", reads)
			require.Equal(t, []string{"2"}, e.VersionsOf(s.UID), "version 1 pruned, version 2 kept")
			require.Equal(t, suite.VCanary("2"), e.GetSecret(tc.name).Data["k"])
		})
	}
}

// A purge reads the live Secret again before each snapshot delete: a
// change to the live Secret after the first of three deletes stops it (no
// further snapshot is deleted) and the run is refused naming the change,
// with the version already purged; the live Secret keeps the change.
func TestIntegrationVersionedPurgeStopsWhenLiveChanges(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := newAPIRecorder(e)
	as := rec.through(e, "proxied-purge", suite.VersionedRules("purge"))
	s := e.CreateSecret(suite.PlainSecret("purge", map[string][]byte{"k": suite.VCanary("0")}))
	for i := 1; i <= 3; i++ {
		suite.RequireOK(t, e.Update("purge", fmt.Sprint("mut-p", i), suite.VCanary(fmt.Sprint(i)), as), "completed")
	}
	require.Equal(t, []string{"1", "2", "3"}, e.VersionsOf(s.UID))
	live := e.GetSecret("purge")

	first := versioned.SnapshotName(s.UID, 1)
	var once sync.Once
	var changed string
	rec.reset(func(r suite.APIRequest) {
		if r.Method != http.MethodDelete || !strings.HasSuffix(r.Path, "/"+first) || r.Status != 200 {
			return
		}
		once.Do(func() {
			out, err := e.Kube.Client().CoreV1().Secrets(e.NS).Patch(context.Background(), "purge", types.MergePatchType,
				[]byte(`{"stringData":{"other":"someone else's"}}`), metav1.PatchOptions{})
			if err == nil {
				changed = out.ResourceVersion
			}
		})
	})
	r := e.RunCmd(suite.DeleteCommand(e.NS, "purge", live.ResourceVersion, "mut-purge", false), as)
	once.Do(func() {}) // the hook's write happens before this returns
	out := suite.RequireRefused(t, r, "changed-concurrently")
	require.NotEmpty(t, changed, "the live Secret was changed after the first delete")
	require.Equal(t, []any{float64(1)}, out["purgedVersions"], "only the first snapshot went")
	require.Equal(t, []string{"2", "3"}, e.VersionsOf(s.UID), "no further snapshot deleted")
	after := e.GetSecret("purge")
	require.Equal(t, changed, after.ResourceVersion, "the live Secret keeps the change")
	require.Equal(t, s.UID, after.UID)
	deletes := 0
	for _, q := range rec.requests() {
		if q.Method == http.MethodDelete {
			deletes++
		}
	}
	require.Equal(t, 1, deletes, "one delete sent in all")
	suite.AssertNoCanary(t, r.Stdout+r.Stderr, suite.VCanary("3"))
}

// A purge that cannot finish says what it did: of three snapshots, one
// held by a finalizer (pending), one whose delete an admission policy
// refuses (failed) and one deleted (absent), the run exits 75 with the
// three counts in its outcome, the live Secret untouched; the same command
// rerun once both are lifted completes.
func TestIntegrationVersionedPurgeCounts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("counted")
	s := e.CreateSecret(suite.PlainSecret("counted", map[string][]byte{"k": suite.VCanary("0")}))
	for i := 1; i <= 3; i++ {
		suite.RequireOK(t, e.Update("counted", fmt.Sprint("mut-c", i), suite.VCanary(fmt.Sprint(i)), as), "completed")
	}
	e.AddFinalizer(versioned.SnapshotName(s.UID, 1))
	lift := e.DenyDelete(versioned.SnapshotName(s.UID, 2))
	live := e.GetSecret("counted")
	del := suite.DeleteCommand(e.NS, "counted", live.ResourceVersion, "mut-cdel", false)
	r := e.RunCmd(del, as)
	require.Equal(t, 75, r.Code, "%s %s", r.Stdout, r.Stderr)
	out := suite.Outcome(t, r)
	require.Equal(t, "history-pending", out["reason"])
	require.Contains(t, out["error"], "absent 1, pending 1, failed 1")
	after := e.GetSecret("counted")
	require.Equal(t, live.ResourceVersion, after.ResourceVersion, "the live Secret untouched")
	require.Nil(t, after.DeletionTimestamp)
	require.Equal(t, []string{"1", "2"}, e.VersionsOf(s.UID), "version 3 deleted, 1 held, 2 refused")
	op, _ := e.JournalOf("mut-cdel")
	require.False(t, op.State.Terminal(), "the operation stays open")
	suite.AssertNoCanary(t, r.Stdout+r.Stderr, suite.VCanary("3"))

	lift()
	e.RemoveFinalizers(versioned.SnapshotName(s.UID, 1))
	suite.RequireOK(t, e.RunCmd(del, as), "deleted")
	require.Empty(t, e.SnapshotsOf(s.UID))
}

// A snapshot changed between the read a purge's delete was decided from
// and the delete (someone's finalizer: the delete's resourceVersion
// precondition fails, 409) is refused, naming it (snapshot-changed, exit
// 2), never deleted again with new preconditions; nothing is deleted.
func TestIntegrationVersionedSnapshotChangedRefuses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := newAPIRecorder(e)
	as := rec.through(e, "proxied-changed", suite.VersionedRules("changed"))
	s := e.CreateSecret(suite.PlainSecret("changed", map[string][]byte{"k": suite.VCanary("0")}))
	suite.RequireOK(t, e.Update("changed", "mut-ch1", suite.VCanary("1"), as), "completed")
	live := e.GetSecret("changed")
	snap := versioned.SnapshotName(s.UID, 1)
	var once sync.Once
	var holdErr error
	t.Cleanup(func() { e.RemoveFinalizers(snap) })
	rec.reset(func(r suite.APIRequest) {
		// Right after keyledger listed the history: someone holds the snapshot.
		if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/namespaces/"+e.NS+"/secrets") {
			once.Do(func() {
				_, holdErr = e.Kube.Client().CoreV1().Secrets(e.NS).Patch(context.Background(), snap, types.MergePatchType,
					[]byte(`{"metadata":{"finalizers":["keyledger.test/hold"]}}`), metav1.PatchOptions{})
			})
		}
	})
	r := e.RunCmd(suite.DeleteCommand(e.NS, "changed", live.ResourceVersion, "mut-chdel", false), as)
	once.Do(func() {}) // the hook's write happens before this returns
	require.NoError(t, holdErr)
	out := suite.RequireRefused(t, r, "snapshot-changed")
	require.Equal(t, snap, out["snapshot"], "the refusal names the snapshot")
	require.Equal(t, []any{}, out["purgedVersions"])
	require.Equal(t, []string{"1"}, e.VersionsOf(s.UID), "nothing deleted")
	held := e.SnapshotsOf(s.UID)[0]
	require.Nil(t, held.DeletionTimestamp, "not deleted with new preconditions")
	require.Equal(t, live.ResourceVersion, e.GetSecret("changed").ResourceVersion)
	deletes := 0
	for _, q := range rec.requests() {
		if q.Method == http.MethodDelete {
			deletes++
			require.Equal(t, 409, q.Status, "the one delete failed its precondition")
		}
	}
	require.Equal(t, 1, deletes)
}
