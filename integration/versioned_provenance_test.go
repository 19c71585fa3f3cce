package integration

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// lookalike is a perfect copy of the snapshot format for version n of
// live (as keyledger wrote it before nonces existed, which it still
// accepts), computed from what anyone can read (the UID, the
// resourceVersion), holding other data.
func lookalike(live *corev1.Secret, n int64, data map[string][]byte) *corev1.Secret {
	yes := true
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: versioned.SnapshotName(live.UID, n),
			Labels: map[string]string{"keyledger.dev/managed-by": "keyledger", "keyledger.dev/kind": "history",
				"keyledger.dev/source-uid": versioned.Hash(string(live.UID)), "keyledger.dev/source-resource-version": versioned.Hash(live.ResourceVersion)},
			Annotations: map[string]string{"keyledger.dev/history-format": "uid-rv-v1", "keyledger.dev/source-uid": string(live.UID),
				"keyledger.dev/source-resource-version": live.ResourceVersion, "keyledger.dev/source-name": live.Name,
				"keyledger.dev/source-type": string(live.Type), "keyledger.dev/version": fmt.Sprint(n),
				"keyledger.dev/snapshot-time": "2026-01-01T00:00:00Z", "keyledger.dev/actor": "req-x/mut-x"},
		},
		Type: corev1.SecretTypeOpaque, Immutable: &yes, Data: data,
	}
}

// history runs `keyledger history` and decodes its JSON.
func provenanceHistory(e *env, name string, opts ...suite.RunOption) versioned.History {
	e.T.Helper()
	h := e.Keyledger([]string{"history", e.NS + "/" + name, "-o", "json"}, opts...)
	require.Equal(e.T, 0, h.Code, "%s %s", h.Stdout, h.Stderr)
	var hist versioned.History
	require.NoError(e.T, json.Unmarshal([]byte(h.Stdout), &hist))
	return hist
}

func historyVersions(h versioned.History) []int64 {
	var out []int64
	for _, v := range h.Versions {
		out = append(out, v.Version)
	}
	return out
}

// Twenty look-alikes above the live counter, planted by another identity,
// neither steer pruning nor count as history: the write is refused with
// its own reason, nothing is deleted, and the documented recovery (raise
// the counter by hand, rerun) works.
func TestIntegrationVersionedPlantedLookalikes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("db")
	s := e.CreateSecret(suite.PlainSecret("db", map[string][]byte{"k": suite.VCanary("0")}))
	for i := 1; i <= 3; i++ {
		suite.RequireOK(t, e.Update("db", fmt.Sprint("mut-u", i), suite.VCanary(fmt.Sprint(i)), as), "completed")
	}
	genuine := e.ObjectsOf(s.UID)
	require.Len(t, genuine, 3)

	live := e.GetSecret("db")
	require.Equal(t, "4", live.Annotations["keyledger.dev/version"])
	planter := e.Planter()
	var planted []string
	for n := int64(5); n < 25; n++ {
		obj, err := planter.CoreV1().Secrets(e.NS).Create(t.Context(), lookalike(live, n, map[string][]byte{"k": suite.VCanary("evil")}), metav1.CreateOptions{})
		require.NoError(t, err)
		planted = append(planted, obj.Name)
	}
	all := e.ObjectsOf(s.UID)
	require.Len(t, all, 23)

	r := e.Update("db", "mut-u4", suite.VCanary("4"), as)
	out := suite.RequireRefused(t, r, "slot-occupied")
	require.EqualValues(t, 20, out["occupiedCount"])
	require.EqualValues(t, 24, out["highestOccupied"])
	require.Equal(t, live.ResourceVersion, e.GetSecret("db").ResourceVersion, "the live write is refused")
	require.Equal(t, all, e.ObjectsOf(s.UID), "nothing deleted, nothing created")
	suite.AssertNoCanary(t, r.Stdout+r.Stderr, suite.VCanary("evil"), suite.VCanary("4"))

	hist := provenanceHistory(e, "db", as)
	require.Equal(t, []int64{1, 2, 3}, historyVersions(hist), "only keyledger's snapshots are history")
	var foreign []string
	for _, f := range hist.Foreign {
		require.Equal(t, versioned.ForeignNotJournaled, f.Reason)
		foreign = append(foreign, f.Name)
	}
	require.ElementsMatch(t, planted, foreign, "every look-alike is reported by name")
	table := e.Keyledger([]string{"history", e.NS + "/db"}, as)
	require.Equal(t, 0, table.Code, table.Stderr)
	require.Contains(t, table.Stdout, "foreign: 20 object(s)")
	require.Contains(t, table.Stdout, planted[19])

	// The counter reaching a planted slot is refused the same way.
	cur := e.GetSecret("db")
	cur.Annotations["keyledger.dev/version"] = "7"
	_, err := e.Kube.Client().CoreV1().Secrets(e.NS).Update(t.Context(), cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	suite.RequireRefused(t, e.Update("db", "mut-u5", suite.VCanary("5"), as), "slot-occupied")

	// Recovery, reviewed by an operator: raise the counter above every
	// planted slot and run a new command.
	cur = e.GetSecret("db")
	cur.Annotations["keyledger.dev/version"] = "25"
	_, err = e.Kube.Client().CoreV1().Secrets(e.NS).Update(t.Context(), cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	suite.RequireOK(t, e.Update("db", "mut-u6", suite.VCanary("6"), as), "completed")
	after := e.ObjectsOf(s.UID)
	for name, id := range all {
		require.Equal(t, id, after[name], "%s untouched", name)
	}
	require.Len(t, after, 24, "the 23 and the new snapshot of v25")
	require.Equal(t, "26", e.GetSecret("db").Annotations["keyledger.dev/version"])
	require.Equal(t, []int64{1, 2, 3, 25}, historyVersions(provenanceHistory(e, "db", as)))

	// A delete without history deletes keyledger's snapshots, never a
	// look-alike.
	cur = e.GetSecret("db")
	suite.RequireOK(t, e.RunCmd(suite.DeleteCommand(e.NS, "db", cur.ResourceVersion, "mut-del", false), as), "deleted")
	left := e.ObjectsOf(s.UID)
	require.Len(t, left, 20)
	for _, name := range planted {
		require.Equal(t, all[name], left[name], "%s untouched", name)
	}
}

// After retention freed version 1, a planted -v1 is no restore target, and
// history reports it as foreign.
func TestIntegrationVersionedPlantedRestoreTarget(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("db")
	limit := suite.WithEnv("KEYLEDGER_HISTORY_LIMIT=2")
	s := e.CreateSecret(suite.PlainSecret("db", map[string][]byte{"k": suite.VCanary("0")}))
	for i := 1; i <= 3; i++ {
		suite.RequireOK(t, e.Update("db", fmt.Sprint("mut-u", i), suite.VCanary(fmt.Sprint(i)), as, limit), "completed")
	}
	require.Equal(t, []string{"2", "3"}, e.VersionsOf(s.UID), "retention freed v1")
	live := e.GetSecret("db")
	_, err := e.Planter().CoreV1().Secrets(e.NS).Create(t.Context(), lookalike(live, 1, map[string][]byte{"k": suite.VCanary("evil")}), metav1.CreateOptions{})
	require.NoError(t, err)

	r := e.RunCmd(suite.RestoreCommand(e.NS, "db", live.ResourceVersion, "mut-r1", 1), as, limit)
	suite.RequireRefused(t, r, "foreign-snapshot")
	require.Equal(t, live.ResourceVersion, e.GetSecret("db").ResourceVersion)
	require.Equal(t, suite.VCanary("3"), e.GetSecret("db").Data["k"])
	suite.AssertNoCanary(t, r.Stdout+r.Stderr, suite.VCanary("evil"))

	hist := provenanceHistory(e, "db", as)
	require.Equal(t, []int64{2, 3}, historyVersions(hist))
	require.Equal(t, []versioned.Foreign{{Name: versioned.SnapshotName(s.UID, 1), Version: 1, Reason: versioned.ForeignNotJournaled}}, hist.Foreign)
	one := e.Keyledger([]string{"history", e.NS + "/db", "--version", "1", "--show-keys"}, as)
	require.Equal(t, 2, one.Code, "%s %s", one.Stdout, one.Stderr)

	// A restore target must be below the live counter.
	suite.RequireRefused(t, e.RunCmd(suite.RestoreCommand(e.NS, "db", live.ResourceVersion, "mut-r4", 4), as, limit), "version-ahead")
	// A genuine version restores.
	suite.RequireOK(t, e.RunCmd(suite.RestoreCommand(e.NS, "db", live.ResourceVersion, "mut-r2", 2), as, limit), "completed")
	require.Equal(t, suite.VCanary("1"), e.GetSecret("db").Data["k"])
}
