package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// A live write interrupted after its call was journaled (the process dies
// before sending it), whose archive another identity deletes before the
// rerun: the rerun re-checks the archive before re-sending, refuses
// archive-missing, and writes nothing. The same for a restore. The journal
// shows no snapshot nonce.
func TestIntegrationVersionedResendRechecksArchive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("upd", "rst")
	t.Run("update", func(t *testing.T) {
		s := e.CreateSecret(suite.PlainSecret("upd", map[string][]byte{"k": suite.VCanary("u0")}))
		cmd := suite.UpdateCommand(e.NS, "upd", s.ResourceVersion, "mut-upd", map[string][]byte{"k": suite.VCanary("u1")})
		r := e.RunCmd(cmd, as, suite.WithFailpoint("after-call#2")) // replace-live journaled, never sent
		require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)
		snap := versioned.SnapshotName(s.UID, 1)
		nonce := e.GetSecret(snap).Annotations[versioned.AnnotationNonce]
		require.Regexp(t, "^[0-9a-f]{32}$", nonce)
		show := e.Keyledger([]string{"journal", "show", "mut-upd", "-o", "json"})
		require.Equal(t, 0, show.Code, show.Stderr)
		require.NotContains(t, show.Stdout, nonce, "journal show prints no nonce")
		require.NotContains(t, show.Stdout, `"nonce"`)
		sum := sha256Hex(nonce)
		require.Contains(t, show.Stdout, sum, "only its digest")

		require.NoError(t, e.Kube.Client().CoreV1().Secrets(e.NS).Delete(t.Context(), snap, metav1.DeleteOptions{}))
		r = e.RunCmd(cmd, as)
		suite.RequireRefused(t, r, "archive-missing")
		require.NotContains(t, r.Stdout, "converged")
		after := e.GetSecret("upd")
		require.Equal(t, s.ResourceVersion, after.ResourceVersion, "not written")
		require.Equal(t, suite.VCanary("u0"), after.Data["k"], "the old data is kept")
		op, records := e.JournalOf("mut-upd")
		require.Equal(t, store.StateRefused, op.State)
		require.Len(t, suite.RecordsOf(records, store.RecordAuthorityCall, "replace-live"), 1, "never sent again")
		suite.AssertNoCanary(t, r.Stdout+r.Stderr, suite.VCanary("u0"), suite.VCanary("u1"))
	})
	t.Run("restore", func(t *testing.T) {
		s := e.CreateSecret(suite.PlainSecret("rst", map[string][]byte{"k": suite.VCanary("r0")}))
		suite.RequireOK(t, e.Update("rst", "mut-rst-1", suite.VCanary("r1"), as), "completed")
		live := e.GetSecret("rst")
		cmd := suite.RestoreCommand(e.NS, "rst", live.ResourceVersion, "mut-rst", 1)
		r := e.RunCmd(cmd, as, suite.WithFailpoint("after-call#2"))
		require.Equal(t, 137, r.Code, "%s %s", r.Stdout, r.Stderr)
		require.NoError(t, e.Kube.Client().CoreV1().Secrets(e.NS).Delete(t.Context(), versioned.SnapshotName(s.UID, 2), metav1.DeleteOptions{}))
		r = e.RunCmd(cmd, as)
		suite.RequireRefused(t, r, "archive-missing")
		require.NotContains(t, r.Stdout, "converged")
		after := e.GetSecret("rst")
		require.Equal(t, live.ResourceVersion, after.ResourceVersion, "not written")
		require.Equal(t, suite.VCanary("r1"), after.Data["k"])
	})
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// A stale SecretUpdate whose predecessor snapshot is a look-alike planted
// by another identity (right name, right source-resource-version, data that
// makes the live bytes match) exits non-zero and is not existing.
func TestIntegrationVersionedStalePlantedPredecessor(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("stale")
	s := e.CreateSecret(suite.PlainSecret("stale", map[string][]byte{"k": suite.VCanary("s0")}))
	// Version 2 is written by hand (someone else): the command the planter
	// forges history for never ran.
	live := s.DeepCopy()
	live.Annotations = map[string]string{"keyledger.dev/version": "2"}
	live.Data = map[string][]byte{"k": suite.VCanary("s1")}
	live, err := e.Kube.Client().CoreV1().Secrets(e.NS).Update(t.Context(), live, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = e.Planter().CoreV1().Secrets(e.NS).Create(t.Context(), lookalike(s, 1, map[string][]byte{"k": suite.VCanary("s0")}), metav1.CreateOptions{})
	require.NoError(t, err)

	r := e.RunCmd(suite.UpdateCommand(e.NS, "stale", s.ResourceVersion, "mut-stale", map[string][]byte{"k": suite.VCanary("s1")}), as)
	suite.RequireRefused(t, r, "stale-resource-version")
	require.Equal(t, live.ResourceVersion, e.GetSecret("stale").ResourceVersion)
}

// A delete without history purges first; when the live delete is then
// refused, the refusal names the versions already purged.
func TestIntegrationVersionedPurgeThenRefusedNamesPurged(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("purged")
	s := e.CreateSecret(suite.PlainSecret("purged", map[string][]byte{"k": suite.VCanary("p0")}))
	for i := 1; i <= 2; i++ {
		suite.RequireOK(t, e.Update("purged", fmt.Sprint("mut-p", i), suite.VCanary(fmt.Sprint("p", i)), as), "completed")
	}
	lift := e.DenyDelete("purged")
	defer lift()
	live := e.GetSecret("purged")
	r := e.RunCmd(suite.DeleteCommand(e.NS, "purged", live.ResourceVersion, "mut-purge", false), as)
	require.Equal(t, 2, r.Code, "%s %s", r.Stdout, r.Stderr)
	out := suite.Outcome(t, r)
	require.Equal(t, []any{1.0, 2.0}, out["purgedVersions"], "the refusal says the history is gone: %s", r.Stdout)
	require.Empty(t, e.SnapshotsOf(s.UID))
	require.Equal(t, live.ResourceVersion, e.GetSecret("purged").ResourceVersion, "the live Secret stays")
}
