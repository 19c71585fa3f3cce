package integration

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// metadataOnly is the Accept header of a read that returns no data.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// snapshotReads are the GETs of snapshot Secrets among reqs.
func snapshotReads(reqs []apiRequest) []apiRequest {
	var out []apiRequest
	for _, r := range reqs {
		if r.Method == "GET" && strings.Contains(r.Path, "/secrets/"+kube.SnapshotPrefix) {
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
	rec := e.newAPIRecorder()
	for _, tc := range []struct{ name, failpoint string }{
		{"lost", "after-send#2"}, // create-snapshot is #1, prune-snapshot #2: applied, its answer not journaled
		{"unsent", "after-call#2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := rec.through(e, "proxied-"+tc.name, versionedRules(tc.name))
			limit := withEnv("KEYLEDGER_HISTORY_LIMIT=1")
			s := e.createSecret(plainSecret(tc.name, map[string][]byte{"k": vCanary("0")}))
			requireOK(t, e.update(tc.name, "mut-"+tc.name+"-1", vCanary("1"), as, limit), "completed")
			cmd := updateCommand(e.ns, tc.name, e.getSecret(tc.name).ResourceVersion, "mut-"+tc.name+"-2", map[string][]byte{"k": vCanary("2")})
			r := e.runCmd(cmd, as, limit, withFailpoint(tc.failpoint))
			require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)

			rec.reset(nil)
			requireOK(t, e.runCmd(cmd, as, limit), "completed")
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
			require.Equal(t, []string{"2"}, e.versionsOf(s.UID), "version 1 pruned, version 2 kept")
			require.Equal(t, vCanary("2"), e.getSecret(tc.name).Data["k"])
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
	rec := e.newAPIRecorder()
	as := rec.through(e, "proxied-purge", versionedRules("purge"))
	s := e.createSecret(plainSecret("purge", map[string][]byte{"k": vCanary("0")}))
	for i := 1; i <= 3; i++ {
		requireOK(t, e.update("purge", fmt.Sprint("mut-p", i), vCanary(fmt.Sprint(i)), as), "completed")
	}
	require.Equal(t, []string{"1", "2", "3"}, e.versionsOf(s.UID))
	live := e.getSecret("purge")

	first := versioned.SnapshotName(s.UID, 1)
	var once sync.Once
	var changed string
	rec.reset(func(r apiRequest) {
		if r.Method != "DELETE" || !strings.HasSuffix(r.Path, "/"+first) || r.Status != 200 {
			return
		}
		once.Do(func() {
			cur := e.getSecret("purge")
			cur.Data["other"] = []byte("someone else's")
			out, err := e.kube.Client().CoreV1().Secrets(e.ns).Update(t.Context(), cur, metav1.UpdateOptions{})
			if err == nil {
				changed = out.ResourceVersion
			}
		})
	})
	r := e.runCmd(deleteCommand(e.ns, "purge", live.ResourceVersion, "mut-purge", false), as)
	out := requireRefused(t, r, "changed-concurrently")
	require.NotEmpty(t, changed, "the live Secret was changed after the first delete")
	require.Equal(t, []any{float64(1)}, out["purgedVersions"], "only the first snapshot went")
	require.Equal(t, []string{"2", "3"}, e.versionsOf(s.UID), "no further snapshot deleted")
	after := e.getSecret("purge")
	require.Equal(t, changed, after.ResourceVersion, "the live Secret keeps the change")
	require.Equal(t, s.UID, after.UID)
	deletes := 0
	for _, q := range rec.requests() {
		if q.Method == "DELETE" {
			deletes++
		}
	}
	require.Equal(t, 1, deletes, "one delete sent in all")
	assertNoCanary(t, r.Stdout+r.Stderr, vCanary("3"))
}
