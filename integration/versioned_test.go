package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// binaryValue is not UTF-8: a BOM, NUL, 0xff and a lone continuation byte.
var binaryValue = []byte{0xef, 0xbb, 0xbf, 0x00, 0xff, 0x80, 'V', 'C', 'A', 'N', 'A', 'R', 'Y', '-', 'b', 'i', 'n'}

func TestIntegrationVersionedUpdateRestoreHistory(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a, b, c, d := suite.VCanary("a"), suite.VCanary("b"), suite.VCanary("c"), suite.VCanary("d")
	orig := suite.PlainSecret("db", map[string][]byte{"password": a, "old": b})
	orig.Labels = map[string]string{"app": "shop"}
	orig.Annotations = map[string]string{"controller.example/owner": "x"}
	s0 := e.CreateSecret(orig)
	as := e.AsWriter("db")
	var outputs strings.Builder

	// v1 (adopted, no counter) -> v2: set password, remove old.
	r := e.RunCmd(suite.UpdateCommand(e.NS, "db", s0.ResourceVersion, "mut-u1", map[string][]byte{"password": c}, "old"), as)
	outputs.WriteString(r.Stdout + r.Stderr)
	out := suite.RequireOK(t, r, "completed")
	require.EqualValues(t, 2, out["version"])
	require.Equal(t, versioned.SnapshotName(s0.UID, 1), out["snapshot"])
	s1 := e.GetSecret("db")
	require.Equal(t, map[string][]byte{"password": c}, s1.Data)
	require.Equal(t, "2", s1.Annotations["keyledger.dev/version"])
	require.Equal(t, "x", s1.Annotations["controller.example/owner"])
	require.Equal(t, s0.UID, s1.UID)
	require.Equal(t, 1, e.SecretWrites("db", s0.ResourceVersion, s1.ResourceVersion), "one live write")
	e.RequireSnapshot(s0, 1, "mut-u1")

	op, records := e.JournalOf("mut-u1")
	require.Equal(t, store.StateCompleted, op.State)
	var steps []string
	for _, rec := range records {
		if rec.Kind == store.RecordAuthorityCall {
			steps = append(steps, rec.Step+" "+rec.Target.String())
			require.Equal(t, 1, rec.Attempt)
			require.Equal(t, string(s0.UID), rec.UID)
		}
	}
	require.Equal(t, []string{"create-snapshot secret/" + versioned.SnapshotName(s0.UID, 1), "replace-live secret/db"}, steps)

	// An exact replay writes nothing.
	r = e.RunCmd(suite.UpdateCommand(e.NS, "db", s0.ResourceVersion, "mut-u1", map[string][]byte{"password": c}, "old"), as)
	suite.RequireOK(t, r, "existing")
	require.Equal(t, s1.ResourceVersion, e.GetSecret("db").ResourceVersion)
	// A lost journal: another database proves none of the history, so the
	// stale command is refused, even though the result is in place (a
	// look-alike predecessor would look the same), and nothing is written.
	fresh, err := suite.Postgres().NewJournal(t.Context(), "kl_"+suite.RandomSuffix(t), e.NS)
	require.NoError(t, err)
	r = e.RunCmd(suite.UpdateCommand(e.NS, "db", s0.ResourceVersion, "mut-u1", map[string][]byte{"password": c}, "old"), as, suite.WithDatabase(fresh.OperatorURL))
	suite.RequireRefused(t, r, "stale-resource-version")
	require.Equal(t, s1.ResourceVersion, e.GetSecret("db").ResourceVersion)

	// v2 -> v3 with a binary value under the key __proto__.
	r = e.RunCmd(suite.UpdateCommand(e.NS, "db", s1.ResourceVersion, "mut-u2", map[string][]byte{"__proto__": binaryValue, "password": d}), as)
	outputs.WriteString(r.Stdout + r.Stderr)
	suite.RequireOK(t, r, "completed")
	s2 := e.GetSecret("db")
	require.Equal(t, binaryValue, s2.Data["__proto__"])
	e.RequireSnapshot(s1, 2, "mut-u2")

	// history: versions, key names and sizes, never values.
	h := e.Keyledger([]string{"history", e.NS + "/db", "-o", "json"}, as)
	outputs.WriteString(h.Stdout + h.Stderr)
	require.Equal(t, 0, h.Code, h.Stderr)
	var hist versioned.History
	require.NoError(t, json.Unmarshal([]byte(h.Stdout), &hist))
	require.Equal(t, int64(3), hist.Version)
	require.Len(t, hist.Versions, 2)
	require.Equal(t, int64(1), hist.Versions[0].Version)
	require.Equal(t, s0.ResourceVersion, hist.Versions[0].SourceResourceVersion)
	require.Equal(t, "req-mut-u1/mut-u1", hist.Versions[0].Actor)
	require.Equal(t, []versioned.KeyInfo{{Name: "old", Size: len(b)}, {Name: "password", Size: len(a)}}, hist.Versions[0].Keys)
	table := e.Keyledger([]string{"history", e.NS + "/db"}, as)
	outputs.WriteString(table.Stdout + table.Stderr)
	require.Equal(t, 0, table.Code, table.Stderr)
	require.Contains(t, table.Stdout, "password(")
	keys := e.Keyledger([]string{"history", e.NS + "/db", "--version", "2", "--show-keys", "-o", "json"}, as)
	outputs.WriteString(keys.Stdout + keys.Stderr)
	require.Equal(t, 0, keys.Code, keys.Stderr)
	require.Contains(t, keys.Stdout, `"digest":"hmac-sha256:`)
	absent := e.Keyledger([]string{"history", e.NS + "/db", "--version", "9", "--show-keys"}, as)
	require.Equal(t, 2, absent.Code)

	// Restore v1 (the adopted state) into v3: v4 holds v1's bytes; v3 archived.
	r = e.RunCmd(suite.RestoreCommand(e.NS, "db", s2.ResourceVersion, "mut-r1", 1), as)
	outputs.WriteString(r.Stdout + r.Stderr)
	out = suite.RequireOK(t, r, "completed")
	require.EqualValues(t, 1, out["restoredVersion"])
	s3 := e.GetSecret("db")
	require.Equal(t, s0.Data, s3.Data)
	require.Equal(t, "4", s3.Annotations["keyledger.dev/version"])
	require.Equal(t, s0.UID, s3.UID)
	require.Equal(t, "shop", s3.Labels["app"])
	require.Equal(t, "x", s3.Annotations["controller.example/owner"])
	e.RequireSnapshot(s2, 3, "mut-r1")

	// Restore v3, the binary one: every byte survives.
	r = e.RunCmd(suite.RestoreCommand(e.NS, "db", s3.ResourceVersion, "mut-r3", 3), as)
	outputs.WriteString(r.Stdout + r.Stderr)
	suite.RequireOK(t, r, "completed")
	s4 := e.GetSecret("db")
	require.Equal(t, s2.Data, s4.Data)
	require.Equal(t, binaryValue, s4.Data["__proto__"])
	require.Equal(t, "5", s4.Annotations["keyledger.dev/version"])

	// A version at or above the live counter is never history.
	r = e.RunCmd(suite.RestoreCommand(e.NS, "db", s4.ResourceVersion, "mut-r9", 9), as)
	suite.RequireRefused(t, r, "version-ahead")
	require.Equal(t, s4.ResourceVersion, e.GetSecret("db").ResourceVersion)

	// No value anywhere: outputs, debug logs, the journal.
	r = e.RunCmd(suite.RestoreCommand(e.NS, "db", s4.ResourceVersion, "mut-r9", 9), as, suite.WithEnv("KEYLEDGER_LOG_LEVEL=debug"))
	outputs.WriteString(r.Stdout + r.Stderr)
	show := e.Keyledger([]string{"journal", "show", "mut-u2", "-o", "json"})
	outputs.WriteString(show.Stdout)
	require.Contains(t, outputs.String(), "mut-u2")
	all := [][]byte{a, b, c, d, binaryValue}
	suite.AssertNoCanary(t, outputs.String(), all...)
	conn := suite.Connect(t, e.Journal.OwnerURL)
	var dump string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT
		(SELECT coalesce(string_agg(row_to_json(o)::text, E'\n'), '') FROM keyledger.operations o) || E'\n' ||
		(SELECT coalesce(string_agg(row_to_json(r)::text, E'\n'), '') FROM keyledger.records r)`).Scan(&dump))
	require.Contains(t, dump, "mut-r3")
	suite.AssertNoCanary(t, dump, all...)
	for _, v := range all {
		s := sha256.Sum256(v)
		require.NotContains(t, dump, hex.EncodeToString(s[:]), "no plain value digest in the journal")
	}
}

func TestIntegrationVersionedCreateAndDelete(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("fresh", "kept", "purged", "held")

	// Create: expectedResourceVersion "" writes version 1, no snapshot.
	r := e.RunCmd(suite.UpdateCommand(e.NS, "fresh", "", "mut-create", map[string][]byte{"token": suite.VCanary("t")}), as)
	suite.RequireOK(t, r, "completed")
	live := e.GetSecret("fresh")
	require.Equal(t, "1", live.Annotations["keyledger.dev/version"])
	require.Equal(t, corev1.SecretTypeOpaque, live.Type)
	require.Empty(t, e.SnapshotsOf(live.UID))
	suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "fresh", "", "mut-create", map[string][]byte{"token": suite.VCanary("t")}), as), "existing")
	suite.RequireRefused(t, e.RunCmd(suite.UpdateCommand(e.NS, "fresh", "", "mut-create-2", map[string][]byte{"token": suite.VCanary("u")}), as), "already-exists")

	// Delete keeping history: the history stays exactly as it was.
	kept := e.CreateSecret(suite.PlainSecret("kept", map[string][]byte{"k": suite.VCanary("k")}))
	suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "kept", kept.ResourceVersion, "mut-k1", map[string][]byte{"k": suite.VCanary("k2")}), as), "completed")
	kept2 := e.GetSecret("kept")
	out := suite.RequireOK(t, e.RunCmd(suite.DeleteCommand(e.NS, "kept", kept2.ResourceVersion, "mut-kdel", true), as), "deleted")
	require.Equal(t, "kept", out["history"])
	_, err := e.Kube.Client().CoreV1().Secrets(e.NS).Get(t.Context(), "kept", metav1.GetOptions{})
	require.True(t, err != nil && strings.Contains(err.Error(), "not found"), "live gone")
	require.Equal(t, []string{"1"}, e.VersionsOf(kept.UID))

	// Delete without history: every snapshot of the UID goes first.
	p := e.CreateSecret(suite.PlainSecret("purged", map[string][]byte{"k": suite.VCanary("p")}))
	suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "purged", p.ResourceVersion, "mut-p1", map[string][]byte{"k": suite.VCanary("p1")}), as), "completed")
	p1 := e.GetSecret("purged")
	suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "purged", p1.ResourceVersion, "mut-p2", map[string][]byte{"k": suite.VCanary("p2")}), as), "completed")
	p2 := e.GetSecret("purged")
	require.Len(t, e.SnapshotsOf(p.UID), 2)
	out = suite.RequireOK(t, e.RunCmd(suite.DeleteCommand(e.NS, "purged", p2.ResourceVersion, "mut-pdel", false), as), "deleted")
	require.Equal(t, "deleted", out["history"])
	require.Empty(t, e.SnapshotsOf(p.UID))
	_, records := e.JournalOf("mut-pdel")
	var steps []string
	for _, rec := range records {
		if rec.Kind == store.RecordAuthorityCall {
			steps = append(steps, rec.Step)
		}
	}
	require.Equal(t, []string{"delete-snapshot", "delete-snapshot", "delete-live"}, steps)

	// A finalizer keeps the live object: outcome pending, exit 0.
	held := suite.PlainSecret("held", map[string][]byte{"k": suite.VCanary("h")})
	held.Finalizers = []string{"keyledger.test/hold"}
	h := e.CreateSecret(held)
	t.Cleanup(func() { e.RemoveFinalizers("held") })
	out = suite.RequireOK(t, e.RunCmd(suite.DeleteCommand(e.NS, "held", h.ResourceVersion, "mut-hdel", false), as), "pending")
	require.EqualValues(t, 1, out["finalizers"])
	still := e.GetSecret("held")
	require.NotNil(t, still.DeletionTimestamp)
	require.Equal(t, h.UID, still.UID)

	// A stale expectedResourceVersion is refused before any side effect.
	stale := e.GetSecret("fresh")
	suite.RequireRefused(t, e.RunCmd(suite.DeleteCommand(e.NS, "fresh", "1", "mut-stale-del", true), as), "stale-resource-version")
	suite.RequireRefused(t, e.RunCmd(suite.UpdateCommand(e.NS, "fresh", "1", "mut-stale-up", map[string][]byte{"token": suite.VCanary("x")}), as), "stale-resource-version")
	require.Equal(t, stale.ResourceVersion, e.GetSecret("fresh").ResourceVersion)
	require.Empty(t, e.SnapshotsOf(stale.UID), "no history side effect")
}

func TestIntegrationVersionedRetention(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("ret")
	limit := suite.WithEnv("KEYLEDGER_HISTORY_LIMIT=2")
	s := e.CreateSecret(suite.PlainSecret("ret", map[string][]byte{"k": suite.VCanary("0")}))
	for i := 1; i <= 3; i++ {
		cur := e.GetSecret("ret")
		suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "ret", cur.ResourceVersion, fmt.Sprintf("mut-ret-%d", i), map[string][]byte{"k": suite.VCanary(fmt.Sprint(i))}), as, limit), "completed")
	}
	require.Equal(t, []string{"2", "3"}, e.VersionsOf(s.UID), "at the limit: the oldest was pruned")
	_, records := e.JournalOf("mut-ret-3")
	pruned := 0
	for _, rec := range records {
		if rec.Kind == store.RecordAuthorityCall && rec.Step == "prune-snapshot" {
			pruned++
			require.Equal(t, "secret/"+versioned.SnapshotName(s.UID, 1), rec.Target.String())
			require.NotEmpty(t, rec.UID)
			require.NotEmpty(t, rec.ResourceVersion, "the prune carries UID and resourceVersion preconditions")
		}
	}
	require.Equal(t, 1, pruned)

	// A finalizer on the oldest snapshot blocks the live write.
	v2 := versioned.SnapshotName(s.UID, 2)
	c := e.Kube.Client().CoreV1().Secrets(e.NS)
	snap, err := c.Get(t.Context(), v2, metav1.GetOptions{})
	require.NoError(t, err)
	snap.Finalizers = []string{"keyledger.test/hold"}
	_, err = c.Update(t.Context(), snap, metav1.UpdateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { e.RemoveFinalizers(v2) })
	// The prune of v2 is pending: the live write waits, exit 75, the
	// operation stays open.
	before := e.GetSecret("ret")
	blocked := suite.UpdateCommand(e.NS, "ret", before.ResourceVersion, "mut-ret-blocked", map[string][]byte{"k": suite.VCanary("b")})
	r := e.RunCmd(blocked, as, limit)
	require.Equal(t, 75, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, "prune-pending", suite.Outcome(t, r)["reason"])
	require.Equal(t, before.ResourceVersion, e.GetSecret("ret").ResourceVersion, "the live write is blocked")
	// Still held: the same command exits 75 again, sending nothing new.
	r = e.RunCmd(blocked, as, limit)
	require.Equal(t, 75, r.Code, "%s %s", r.Stdout, r.Stderr)

	// Released: the same command rerun finds v2 gone and completes.
	e.RemoveFinalizers(v2)
	r = e.RunCmd(blocked, as, limit)
	suite.RequireOK(t, r, "completed")
	require.Equal(t, []string{"3", "4"}, e.VersionsOf(s.UID))
	require.Equal(t, "5", e.GetSecret("ret").Annotations["keyledger.dev/version"])
	e.RequireSnapshot(before, 4, "mut-ret-blocked")
}

func TestIntegrationVersionedBadRetention(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("lim")
	s := e.CreateSecret(suite.PlainSecret("lim", map[string][]byte{"k": suite.VCanary("l")}))
	url, connections := suite.PGListener(t)
	for i, v := range []string{"", "0", "-1", "1.5", "01", " 5", "5 ", "+5", "101", "1e1", "twenty"} {
		r := e.RunCmd(suite.UpdateCommand(e.NS, "lim", s.ResourceVersion, fmt.Sprintf("mut-lim-%d", i), map[string][]byte{"k": suite.VCanary("m")}), as,
			suite.WithEnv("KEYLEDGER_HISTORY_LIMIT="+v), suite.WithDatabase(url))
		require.Equal(t, 64, r.Code, "%q: %s %s", v, r.Stdout, r.Stderr)
		require.Contains(t, suite.Outcome(t, r)["error"], "KEYLEDGER_HISTORY_LIMIT")
	}
	require.Zero(t, connections.Load(), "the journal is never contacted")
	require.Equal(t, s.ResourceVersion, e.GetSecret("lim").ResourceVersion)
	require.Empty(t, e.SnapshotsOf(s.UID))
}

func TestIntegrationVersionedSourceConflictAndGuards(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("occupied", "big", "sa-token", "frozen", "same")

	// An impostor in the slot: same labels and annotations, other bytes.
	s := e.CreateSecret(suite.PlainSecret("occupied", map[string][]byte{"k": suite.VCanary("o")}))
	impostor := suite.PlainSecret(versioned.SnapshotName(s.UID, 1), map[string][]byte{"k": suite.VCanary("evil")})
	yes := true
	impostor.Immutable = &yes
	impostor.Labels = map[string]string{"keyledger.dev/managed-by": "keyledger", "keyledger.dev/kind": "history",
		"keyledger.dev/source-uid": versioned.Hash(string(s.UID)), "keyledger.dev/source-resource-version": versioned.Hash(s.ResourceVersion)}
	impostor.Annotations = map[string]string{"keyledger.dev/history-format": "uid-rv-v1", "keyledger.dev/source-uid": string(s.UID),
		"keyledger.dev/source-resource-version": s.ResourceVersion, "keyledger.dev/source-name": "occupied",
		"keyledger.dev/source-type": "Opaque", "keyledger.dev/version": "1", "keyledger.dev/snapshot-time": "2026-01-01T00:00:00Z",
		"keyledger.dev/actor": "someone/else"}
	e.CreateSecret(impostor)
	r := e.RunCmd(suite.UpdateCommand(e.NS, "occupied", s.ResourceVersion, "mut-occ", map[string][]byte{"k": suite.VCanary("n")}), as)
	suite.RequireRefused(t, r, "slot-occupied")
	require.Equal(t, s.ResourceVersion, e.GetSecret("occupied").ResourceVersion)
	suite.AssertNoCanary(t, r.Stdout+r.Stderr, suite.VCanary("o"), suite.VCanary("evil"), suite.VCanary("n"))

	// Size guard: 780 KiB raw is over 1 MiB as base64: exit 64, nothing written.
	big := e.CreateSecret(suite.PlainSecret("big", map[string][]byte{"blob": make([]byte, 780<<10)}))
	url, connections := suite.PGListener(t)
	r = e.RunCmd(suite.UpdateCommand(e.NS, "big", big.ResourceVersion, "mut-big", map[string][]byte{"k": suite.VCanary("b")}), as, suite.WithDatabase(url))
	require.Equal(t, 64, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Contains(t, suite.Outcome(t, r)["error"], "guard")
	require.Zero(t, connections.Load())
	require.Equal(t, big.ResourceVersion, e.GetSecret("big").ResourceVersion)
	require.Empty(t, e.SnapshotsOf(big.UID))

	// ServiceAccount token Secrets are refused.
	tok := suite.PlainSecret("sa-token", map[string][]byte{"extra": suite.VCanary("s")})
	tok.Type = corev1.SecretTypeServiceAccountToken
	tok.Annotations = map[string]string{"kubernetes.io/service-account.name": "default"}
	tokS := e.CreateSecret(tok)
	suite.RequireRefused(t, e.RunCmd(suite.UpdateCommand(e.NS, "sa-token", tokS.ResourceVersion, "mut-tok", map[string][]byte{"extra": suite.VCanary("s2")}), as), "service-account-token")

	// Restore into an immutable Secret: refused unless byte-identical.
	for _, tc := range []struct {
		name   string
		update []byte
		want   string
	}{{"frozen", suite.VCanary("f2"), "immutable"}, {"same", suite.VCanary("f1"), "existing"}} {
		f := e.CreateSecret(suite.PlainSecret(tc.name, map[string][]byte{"k": suite.VCanary("f1")}))
		suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, tc.name, f.ResourceVersion, "mut-"+tc.name, map[string][]byte{"k": tc.update}), as), "completed")
		cur := e.GetSecret(tc.name)
		cur.Immutable = &yes
		cur, err := e.Kube.Client().CoreV1().Secrets(e.NS).Update(t.Context(), cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		r := e.RunCmd(suite.RestoreCommand(e.NS, tc.name, cur.ResourceVersion, "mut-restore-"+tc.name, 1), as)
		if tc.want == "existing" {
			suite.RequireOK(t, r, "existing")
		} else {
			suite.RequireRefused(t, r, tc.want)
		}
		require.Equal(t, cur.ResourceVersion, e.GetSecret(tc.name).ResourceVersion)
	}

	// A command file holding values must be private.
	path := e.WriteCommand("public.json", suite.UpdateCommand(e.NS, "same", "1", "mut-public", map[string][]byte{"k": suite.VCanary("p")}))
	require.NoError(t, os.Chmod(path, 0o644))
	r = e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 64, r.Code)
	require.Contains(t, suite.Outcome(t, r)["error"], "not-private")
}

func TestIntegrationVersionedConcurrentUpdates(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("race")
	s := e.CreateSecret(suite.PlainSecret("race", map[string][]byte{"k": suite.VCanary("r0")}))
	results := make([]suite.Result, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.RunCmd(suite.UpdateCommand(e.NS, "race", s.ResourceVersion, fmt.Sprintf("mut-race-%d", i), map[string][]byte{"k": suite.VCanary(fmt.Sprint("r", i+1))}), as)
		}()
	}
	wg.Wait()
	codes := []int{results[0].Code, results[1].Code}
	require.ElementsMatch(t, []int{0, 2}, codes, "%v", results)
	winner, loser := 0, results[1]
	if results[0].Code != 0 {
		winner, loser = 1, results[0]
	}
	require.Contains(t, []any{"changed-concurrently", "stale-resource-version"}, suite.Outcome(t, loser)["reason"])
	after := e.GetSecret("race")
	require.Equal(t, suite.VCanary(fmt.Sprint("r", winner+1)), after.Data["k"])
	require.Equal(t, "2", after.Annotations["keyledger.dev/version"])
	require.Equal(t, 1, e.SecretWrites("race", s.ResourceVersion, after.ResourceVersion))
	// The one snapshot of v1 is the exact source state, whichever run took it.
	require.Equal(t, []string{"1"}, e.VersionsOf(s.UID))
	e.RequireSnapshot(s, 1, "")
}

func TestIntegrationVersionedLostResponses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name, fault, kind, outcome string
		calls                      int
	}{
		{"create-live", "drop-response:POST:/secrets#1", "create", "converged", 1},
		{"create-snapshot", "drop-response:POST:/secrets#1", "update", "completed", 3},
		{"prune-snapshot", "drop-response:DELETE:/secrets/keyledger-h-#1", "update", "completed", 3},
		{"replace-live", "drop-response:PUT:/secrets/#1", "update", "converged", 3},
		{"replace-live-reset", "reset:PUT:/secrets/#1", "update", "completed", 4},
		{"delete-live", "drop-response:DELETE:/secrets/lost-delete-live#1", "delete", "deleted", 1},
	}
	names := make([]string, len(cases))
	for i, tc := range cases {
		names[i] = "lost-" + tc.name
	}
	as := e.AsWriter(names...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "lost-" + tc.name
			limit := suite.WithEnv("KEYLEDGER_HISTORY_LIMIT=1")
			fault := suite.WithEnv("KEYLEDGER_FAULT=" + tc.fault)
			mutation := "mut-" + name
			var s *corev1.Secret
			var r suite.Result
			switch tc.kind {
			case "create":
				r = e.RunCmd(suite.UpdateCommand(e.NS, name, "", mutation, map[string][]byte{"k": suite.VCanary("c")}), as, fault)
			case "delete":
				s = e.CreateSecret(suite.PlainSecret(name, map[string][]byte{"k": suite.VCanary("d")}))
				r = e.RunCmd(suite.DeleteCommand(e.NS, name, s.ResourceVersion, mutation, true), as, fault)
			default:
				// One update first, so the next one has a snapshot to prune.
				s0 := e.CreateSecret(suite.PlainSecret(name, map[string][]byte{"k": suite.VCanary("0")}))
				suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, name, s0.ResourceVersion, mutation+"-pre", map[string][]byte{"k": suite.VCanary("1")}), as, limit), "completed")
				s = e.GetSecret(name)
				r = e.RunCmd(suite.UpdateCommand(e.NS, name, s.ResourceVersion, mutation, map[string][]byte{"k": suite.VCanary("2")}), as, limit, fault)
			}
			suite.RequireOK(t, r, tc.outcome)
			_, records := e.JournalOf(mutation)
			require.Equal(t, tc.calls, suite.Count(records, store.RecordAuthorityCall), "%v", suite.Kinds(records))
			require.GreaterOrEqual(t, suite.Count(records, store.RecordResolution), 1, "settled by re-reading")
			switch tc.kind {
			case "create":
				live := e.GetSecret(name)
				require.Equal(t, "1", live.Annotations["keyledger.dev/version"])
				require.Equal(t, suite.VCanary("c"), live.Data["k"])
			case "delete":
				_, err := e.Kube.Client().CoreV1().Secrets(e.NS).Get(t.Context(), name, metav1.GetOptions{})
				require.Error(t, err)
				require.Empty(t, e.SnapshotsOf(s.UID), "keepHistory: no snapshot is made")
			default:
				after := e.GetSecret(name)
				require.Equal(t, suite.VCanary("2"), after.Data["k"])
				require.Equal(t, "3", after.Annotations["keyledger.dev/version"])
				require.Equal(t, 1, e.SecretWrites(name, s.ResourceVersion, after.ResourceVersion), "one live write")
				require.Equal(t, []string{"2"}, e.VersionsOf(s.UID), "one snapshot, the oldest pruned")
				e.RequireSnapshot(s, 2, mutation)
			}
		})
	}
}

func TestIntegrationVersionedCrashAtEveryTransition(t *testing.T) {
	t.Parallel()
	e := setup(t)
	crashes := []string{
		"after-prepare",
		"after-call#1", "after-send#1", "after-answer#1", // create-snapshot
		"after-call#2", "after-send#2", "after-answer#2", // prune-snapshot
		"after-call#3", "after-send#3", // replace-live
		"after-complete",
	}
	names := make([]string, len(crashes))
	for i := range crashes {
		names[i] = fmt.Sprintf("crash-%d", i)
	}
	as := e.AsWriter(names...)
	limit := suite.WithEnv("KEYLEDGER_HISTORY_LIMIT=1")
	for i, fp := range crashes {
		t.Run(fp, func(t *testing.T) {
			name := names[i]
			s0 := e.CreateSecret(suite.PlainSecret(name, map[string][]byte{"k": suite.VCanary("0")}))
			suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, name, s0.ResourceVersion, "mut-pre-"+name, map[string][]byte{"k": suite.VCanary("1")}), as, limit), "completed")
			s := e.GetSecret(name)
			cmd := suite.UpdateCommand(e.NS, name, s.ResourceVersion, "mut-"+name, map[string][]byte{"k": suite.VCanary("2")})
			r := e.RunCmd(cmd, as, limit, suite.WithFailpoint(fp))
			require.Equal(t, 137, r.Code, "must die at %s: %s %s", fp, r.Stdout, r.Stderr)
			r = e.RunCmd(cmd, as, limit)
			require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
			require.Contains(t, []any{"completed", "converged", "existing"}, suite.Outcome(t, r)["outcome"])
			after := e.GetSecret(name)
			require.Equal(t, suite.VCanary("2"), after.Data["k"])
			require.Equal(t, "3", after.Annotations["keyledger.dev/version"], "no lost version")
			require.Equal(t, 1, e.SecretWrites(name, s.ResourceVersion, after.ResourceVersion), "one live write")
			require.Equal(t, []string{"2"}, e.VersionsOf(s.UID), "no duplicate snapshot, the oldest pruned")
			e.RequireSnapshot(s, 2, "mut-"+name)
			op, records := e.JournalOf("mut-" + name)
			require.Equal(t, store.StateCompleted, op.State)
			require.Equal(t, 1, suite.Count(records, store.RecordCompletion))
		})
	}
}

func TestIntegrationVersionedRecreatedName(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("phoenix")
	old := e.CreateSecret(suite.PlainSecret("phoenix", map[string][]byte{"k": suite.VCanary("old0")}))
	suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "phoenix", old.ResourceVersion, "mut-old-1", map[string][]byte{"k": suite.VCanary("old1")}), as), "completed")
	old1 := e.GetSecret("phoenix")
	suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "phoenix", old1.ResourceVersion, "mut-old-2", map[string][]byte{"k": suite.VCanary("old2")}), as), "completed")
	// Deleted behind keyledger's back and recreated: a new UID, a new lifetime.
	require.NoError(t, e.Kube.Client().CoreV1().Secrets(e.NS).Delete(t.Context(), "phoenix", metav1.DeleteOptions{}))
	fresh := e.CreateSecret(suite.PlainSecret("phoenix", map[string][]byte{"k": suite.VCanary("new0")}))
	require.NotEqual(t, old.UID, fresh.UID)

	limit := suite.WithEnv("KEYLEDGER_HISTORY_LIMIT=1")
	suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "phoenix", fresh.ResourceVersion, "mut-new-1", map[string][]byte{"k": suite.VCanary("new1")}), as, limit), "completed")
	new1 := e.GetSecret("phoenix")
	require.Equal(t, "2", new1.Annotations["keyledger.dev/version"], "the counter starts again for the new UID")
	suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "phoenix", new1.ResourceVersion, "mut-new-2", map[string][]byte{"k": suite.VCanary("new2")}), as, limit), "completed")
	require.Equal(t, []string{"1", "2"}, e.VersionsOf(old.UID), "the predecessor's snapshots are never pruned")
	require.Equal(t, []string{"2"}, e.VersionsOf(fresh.UID))

	h := e.Keyledger([]string{"history", e.NS + "/phoenix", "-o", "json"}, as)
	require.Equal(t, 0, h.Code, h.Stderr)
	var hist versioned.History
	require.NoError(t, json.Unmarshal([]byte(h.Stdout), &hist))
	require.Len(t, hist.Versions, 1, "only the current UID's history is listed")
	require.Equal(t, fresh.UID, hist.UID)

	// Version 1 exists only for the predecessor: never restored through the new UID.
	new2 := e.GetSecret("phoenix")
	suite.RequireRefused(t, e.RunCmd(suite.RestoreCommand(e.NS, "phoenix", new2.ResourceVersion, "mut-new-r1", 1), as), "version-absent")
	suite.RequireOK(t, e.RunCmd(suite.RestoreCommand(e.NS, "phoenix", new2.ResourceVersion, "mut-new-r2", 2), as), "completed")
	require.Equal(t, suite.VCanary("new1"), e.GetSecret("phoenix").Data["k"])
}

func TestIntegrationVersionedPermissionMatrix(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i, tc := range []struct {
		name string
		edit func(r []rbacv1.PolicyRule)
	}{
		{"widened-with-patch", func(r []rbacv1.PolicyRule) { r[0].Verbs = append(r[0].Verbs, "patch") }},
		{"widened-with-watch", func(r []rbacv1.PolicyRule) { r[0].Verbs = append(r[0].Verbs, "watch") }},
		{"update-any-secret", func(r []rbacv1.PolicyRule) { r[1].ResourceNames = nil }},
		{"update-a-second-secret", func(r []rbacv1.PolicyRule) { r[1].ResourceNames = append(r[1].ResourceNames, "orders-db") }},
		{"missing-list", func(r []rbacv1.PolicyRule) { r[0].Verbs = []string{"get", "create", "delete"} }},
		{"missing-delete", func(r []rbacv1.PolicyRule) { r[0].Verbs = []string{"get", "list", "create"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("matrix-%d", i)
			s := e.CreateSecret(suite.PlainSecret(name, map[string][]byte{"k": suite.VCanary("m")}))
			rules := suite.VersionedRules(name)
			tc.edit(rules)
			kubeconfig := e.ServiceAccountKubeconfig("matrix-"+fmt.Sprint(i), rules)
			url, connections := suite.PGListener(t)
			r := e.RunCmd(suite.UpdateCommand(e.NS, name, s.ResourceVersion, "mut-"+name, map[string][]byte{"k": suite.VCanary("n")}), suite.AsKubeconfig(kubeconfig), suite.WithDatabase(url))
			require.Equal(t, 77, r.Code, "%s %s", r.Stdout, r.Stderr)
			require.Equal(t, "permission-mismatch", suite.Outcome(t, r)["reason"])
			require.Zero(t, connections.Load(), "PostgreSQL is never contacted")
			require.Equal(t, s.ResourceVersion, e.GetSecret(name).ResourceVersion)
		})
	}
}
