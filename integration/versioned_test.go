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

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// binaryValue is not UTF-8: a BOM, NUL, 0xff and a lone continuation byte.
var binaryValue = []byte{0xef, 0xbb, 0xbf, 0x00, 0xff, 0x80, 'V', 'C', 'A', 'N', 'A', 'R', 'Y', '-', 'b', 'i', 'n'}

func TestIntegrationVersionedUpdateRestoreHistory(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a, b, c, d := vCanary("a"), vCanary("b"), vCanary("c"), vCanary("d")
	orig := plainSecret("db", map[string][]byte{"password": a, "old": b})
	orig.Labels = map[string]string{"app": "shop"}
	orig.Annotations = map[string]string{"controller.example/owner": "x"}
	s0 := e.createSecret(orig)
	as := e.asWriter("db")
	var outputs strings.Builder

	// v1 (adopted, no counter) -> v2: set password, remove old.
	r := e.runCmd(updateCommand(e.ns, "db", s0.ResourceVersion, "mut-u1", map[string][]byte{"password": c}, "old"), as)
	outputs.WriteString(r.Stdout + r.Stderr)
	out := requireOK(t, r, "completed")
	require.EqualValues(t, 2, out["version"])
	require.Equal(t, versioned.SnapshotName(s0.UID, 1), out["snapshot"])
	s1 := e.getSecret("db")
	require.Equal(t, map[string][]byte{"password": c}, s1.Data)
	require.Equal(t, "2", s1.Annotations["keyledger.dev/version"])
	require.Equal(t, "x", s1.Annotations["controller.example/owner"])
	require.Equal(t, s0.UID, s1.UID)
	require.Equal(t, 1, e.secretWrites("db", s0.ResourceVersion, s1.ResourceVersion), "one live write")
	e.requireSnapshot(s0, 1, "mut-u1")

	op, records := e.journalOf("mut-u1")
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
	r = e.runCmd(updateCommand(e.ns, "db", s0.ResourceVersion, "mut-u1", map[string][]byte{"password": c}, "old"), as)
	requireOK(t, r, "existing")
	require.Equal(t, s1.ResourceVersion, e.getSecret("db").ResourceVersion)
	// A lost journal: another database proves none of the history, so the
	// stale command is refused, even though the result is in place (a
	// look-alike predecessor would look the same), and nothing is written.
	fresh, err := shared.pg.NewJournal(t.Context(), "kl_"+randomSuffix(t), e.ns)
	require.NoError(t, err)
	r = e.runCmd(updateCommand(e.ns, "db", s0.ResourceVersion, "mut-u1", map[string][]byte{"password": c}, "old"), as, withDatabase(fresh.OperatorURL))
	requireRefused(t, r, "stale-resource-version")
	require.Equal(t, s1.ResourceVersion, e.getSecret("db").ResourceVersion)

	// v2 -> v3 with a binary value under the key __proto__.
	r = e.runCmd(updateCommand(e.ns, "db", s1.ResourceVersion, "mut-u2", map[string][]byte{"__proto__": binaryValue, "password": d}), as)
	outputs.WriteString(r.Stdout + r.Stderr)
	requireOK(t, r, "completed")
	s2 := e.getSecret("db")
	require.Equal(t, binaryValue, s2.Data["__proto__"])
	e.requireSnapshot(s1, 2, "mut-u2")

	// history: versions, key names and sizes, never values.
	h := e.keyledger([]string{"history", e.ns + "/db", "-o", "json"}, as)
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
	table := e.keyledger([]string{"history", e.ns + "/db"}, as)
	outputs.WriteString(table.Stdout + table.Stderr)
	require.Equal(t, 0, table.Code, table.Stderr)
	require.Contains(t, table.Stdout, "password(")
	keys := e.keyledger([]string{"history", e.ns + "/db", "--version", "2", "--show-keys", "-o", "json"}, as)
	outputs.WriteString(keys.Stdout + keys.Stderr)
	require.Equal(t, 0, keys.Code, keys.Stderr)
	require.Contains(t, keys.Stdout, `"digest":"hmac-sha256:`)
	absent := e.keyledger([]string{"history", e.ns + "/db", "--version", "9", "--show-keys"}, as)
	require.Equal(t, 2, absent.Code)

	// Restore v1 (the adopted state) into v3: v4 holds v1's bytes; v3 archived.
	r = e.runCmd(restoreCommand(e.ns, "db", s2.ResourceVersion, "mut-r1", 1), as)
	outputs.WriteString(r.Stdout + r.Stderr)
	out = requireOK(t, r, "completed")
	require.EqualValues(t, 1, out["restoredVersion"])
	s3 := e.getSecret("db")
	require.Equal(t, s0.Data, s3.Data)
	require.Equal(t, "4", s3.Annotations["keyledger.dev/version"])
	require.Equal(t, s0.UID, s3.UID)
	require.Equal(t, "shop", s3.Labels["app"])
	require.Equal(t, "x", s3.Annotations["controller.example/owner"])
	e.requireSnapshot(s2, 3, "mut-r1")

	// Restore v3, the binary one: every byte survives.
	r = e.runCmd(restoreCommand(e.ns, "db", s3.ResourceVersion, "mut-r3", 3), as)
	outputs.WriteString(r.Stdout + r.Stderr)
	requireOK(t, r, "completed")
	s4 := e.getSecret("db")
	require.Equal(t, s2.Data, s4.Data)
	require.Equal(t, binaryValue, s4.Data["__proto__"])
	require.Equal(t, "5", s4.Annotations["keyledger.dev/version"])

	// A version at or above the live counter is never history.
	r = e.runCmd(restoreCommand(e.ns, "db", s4.ResourceVersion, "mut-r9", 9), as)
	requireRefused(t, r, "version-ahead")
	require.Equal(t, s4.ResourceVersion, e.getSecret("db").ResourceVersion)

	// No value anywhere: outputs, debug logs, the journal.
	r = e.runCmd(restoreCommand(e.ns, "db", s4.ResourceVersion, "mut-r9", 9), as, withEnv("KEYLEDGER_LOG_LEVEL=debug"))
	outputs.WriteString(r.Stdout + r.Stderr)
	show := e.keyledger([]string{"journal", "show", "mut-u2", "-o", "json"})
	outputs.WriteString(show.Stdout)
	require.Contains(t, outputs.String(), "mut-u2")
	all := [][]byte{a, b, c, d, binaryValue}
	assertNoCanary(t, outputs.String(), all...)
	conn := connect(t, e.journal.OwnerURL)
	var dump string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT
		(SELECT coalesce(string_agg(row_to_json(o)::text, E'\n'), '') FROM keyledger.operations o) || E'\n' ||
		(SELECT coalesce(string_agg(row_to_json(r)::text, E'\n'), '') FROM keyledger.records r)`).Scan(&dump))
	require.Contains(t, dump, "mut-r3")
	assertNoCanary(t, dump, all...)
	for _, v := range all {
		s := sha256.Sum256(v)
		require.NotContains(t, dump, hex.EncodeToString(s[:]), "no plain value digest in the journal")
	}
}

func TestIntegrationVersionedCreateAndDelete(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("fresh", "kept", "purged", "held")

	// Create: expectedResourceVersion "" writes version 1, no snapshot.
	r := e.runCmd(updateCommand(e.ns, "fresh", "", "mut-create", map[string][]byte{"token": vCanary("t")}), as)
	requireOK(t, r, "completed")
	live := e.getSecret("fresh")
	require.Equal(t, "1", live.Annotations["keyledger.dev/version"])
	require.Equal(t, corev1.SecretTypeOpaque, live.Type)
	require.Empty(t, e.snapshotsOf(live.UID))
	requireOK(t, e.runCmd(updateCommand(e.ns, "fresh", "", "mut-create", map[string][]byte{"token": vCanary("t")}), as), "existing")
	requireRefused(t, e.runCmd(updateCommand(e.ns, "fresh", "", "mut-create-2", map[string][]byte{"token": vCanary("u")}), as), "already-exists")

	// Delete keeping history: the history stays exactly as it was.
	kept := e.createSecret(plainSecret("kept", map[string][]byte{"k": vCanary("k")}))
	requireOK(t, e.runCmd(updateCommand(e.ns, "kept", kept.ResourceVersion, "mut-k1", map[string][]byte{"k": vCanary("k2")}), as), "completed")
	kept2 := e.getSecret("kept")
	out := requireOK(t, e.runCmd(deleteCommand(e.ns, "kept", kept2.ResourceVersion, "mut-kdel", true), as), "deleted")
	require.Equal(t, "kept", out["history"])
	_, err := e.kube.Client().CoreV1().Secrets(e.ns).Get(t.Context(), "kept", metav1.GetOptions{})
	require.True(t, err != nil && strings.Contains(err.Error(), "not found"), "live gone")
	require.Equal(t, []string{"1"}, e.versionsOf(kept.UID))

	// Delete without history: every snapshot of the UID goes first.
	p := e.createSecret(plainSecret("purged", map[string][]byte{"k": vCanary("p")}))
	requireOK(t, e.runCmd(updateCommand(e.ns, "purged", p.ResourceVersion, "mut-p1", map[string][]byte{"k": vCanary("p1")}), as), "completed")
	p1 := e.getSecret("purged")
	requireOK(t, e.runCmd(updateCommand(e.ns, "purged", p1.ResourceVersion, "mut-p2", map[string][]byte{"k": vCanary("p2")}), as), "completed")
	p2 := e.getSecret("purged")
	require.Len(t, e.snapshotsOf(p.UID), 2)
	out = requireOK(t, e.runCmd(deleteCommand(e.ns, "purged", p2.ResourceVersion, "mut-pdel", false), as), "deleted")
	require.Equal(t, "deleted", out["history"])
	require.Empty(t, e.snapshotsOf(p.UID))
	_, records := e.journalOf("mut-pdel")
	var steps []string
	for _, rec := range records {
		if rec.Kind == store.RecordAuthorityCall {
			steps = append(steps, rec.Step)
		}
	}
	require.Equal(t, []string{"delete-snapshot", "delete-snapshot", "delete-live"}, steps)

	// A finalizer keeps the live object: outcome pending, exit 0.
	held := plainSecret("held", map[string][]byte{"k": vCanary("h")})
	held.Finalizers = []string{"keyledger.test/hold"}
	h := e.createSecret(held)
	t.Cleanup(func() { e.removeFinalizers("held") })
	out = requireOK(t, e.runCmd(deleteCommand(e.ns, "held", h.ResourceVersion, "mut-hdel", false), as), "pending")
	require.EqualValues(t, 1, out["finalizers"])
	still := e.getSecret("held")
	require.NotNil(t, still.DeletionTimestamp)
	require.Equal(t, h.UID, still.UID)

	// A stale expectedResourceVersion is refused before any side effect.
	stale := e.getSecret("fresh")
	requireRefused(t, e.runCmd(deleteCommand(e.ns, "fresh", "1", "mut-stale-del", true), as), "stale-resource-version")
	requireRefused(t, e.runCmd(updateCommand(e.ns, "fresh", "1", "mut-stale-up", map[string][]byte{"token": vCanary("x")}), as), "stale-resource-version")
	require.Equal(t, stale.ResourceVersion, e.getSecret("fresh").ResourceVersion)
	require.Empty(t, e.snapshotsOf(stale.UID), "no history side effect")
}

func TestIntegrationVersionedRetention(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("ret")
	limit := withEnv("KEYLEDGER_HISTORY_LIMIT=2")
	s := e.createSecret(plainSecret("ret", map[string][]byte{"k": vCanary("0")}))
	for i := 1; i <= 3; i++ {
		cur := e.getSecret("ret")
		requireOK(t, e.runCmd(updateCommand(e.ns, "ret", cur.ResourceVersion, fmt.Sprintf("mut-ret-%d", i), map[string][]byte{"k": vCanary(fmt.Sprint(i))}), as, limit), "completed")
	}
	require.Equal(t, []string{"2", "3"}, e.versionsOf(s.UID), "at the limit: the oldest was pruned")
	_, records := e.journalOf("mut-ret-3")
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
	c := e.kube.Client().CoreV1().Secrets(e.ns)
	snap, err := c.Get(t.Context(), v2, metav1.GetOptions{})
	require.NoError(t, err)
	snap.Finalizers = []string{"keyledger.test/hold"}
	_, err = c.Update(t.Context(), snap, metav1.UpdateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { e.removeFinalizers(v2) })
	// The prune of v2 is pending: the live write waits, exit 75, the
	// operation stays open.
	before := e.getSecret("ret")
	blocked := updateCommand(e.ns, "ret", before.ResourceVersion, "mut-ret-blocked", map[string][]byte{"k": vCanary("b")})
	r := e.runCmd(blocked, as, limit)
	require.Equal(t, 75, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, "prune-pending", outcome(t, r)["reason"])
	require.Equal(t, before.ResourceVersion, e.getSecret("ret").ResourceVersion, "the live write is blocked")
	// Still held: the same command exits 75 again, sending nothing new.
	r = e.runCmd(blocked, as, limit)
	require.Equal(t, 75, r.Code, "%s %s", r.Stdout, r.Stderr)

	// Released: the same command rerun finds v2 gone and completes.
	e.removeFinalizers(v2)
	r = e.runCmd(blocked, as, limit)
	requireOK(t, r, "completed")
	require.Equal(t, []string{"3", "4"}, e.versionsOf(s.UID))
	require.Equal(t, "5", e.getSecret("ret").Annotations["keyledger.dev/version"])
	e.requireSnapshot(before, 4, "mut-ret-blocked")
}

func TestIntegrationVersionedBadRetention(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("lim")
	s := e.createSecret(plainSecret("lim", map[string][]byte{"k": vCanary("l")}))
	url, connections := pgListener(t)
	for i, v := range []string{"", "0", "-1", "1.5", "01", " 5", "5 ", "+5", "101", "1e1", "twenty"} {
		r := e.runCmd(updateCommand(e.ns, "lim", s.ResourceVersion, fmt.Sprintf("mut-lim-%d", i), map[string][]byte{"k": vCanary("m")}), as,
			withEnv("KEYLEDGER_HISTORY_LIMIT="+v), withDatabase(url))
		require.Equal(t, 64, r.Code, "%q: %s %s", v, r.Stdout, r.Stderr)
		require.Contains(t, outcome(t, r)["error"], "KEYLEDGER_HISTORY_LIMIT")
	}
	require.Zero(t, connections.Load(), "the journal is never contacted")
	require.Equal(t, s.ResourceVersion, e.getSecret("lim").ResourceVersion)
	require.Empty(t, e.snapshotsOf(s.UID))
}

func TestIntegrationVersionedSourceConflictAndGuards(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("occupied", "big", "sa-token", "frozen", "same")

	// An impostor in the slot: same labels and annotations, other bytes.
	s := e.createSecret(plainSecret("occupied", map[string][]byte{"k": vCanary("o")}))
	impostor := plainSecret(versioned.SnapshotName(s.UID, 1), map[string][]byte{"k": vCanary("evil")})
	yes := true
	impostor.Immutable = &yes
	impostor.Labels = map[string]string{"keyledger.dev/managed-by": "keyledger", "keyledger.dev/kind": "history",
		"keyledger.dev/source-uid": versioned.Hash(string(s.UID)), "keyledger.dev/source-resource-version": versioned.Hash(s.ResourceVersion)}
	impostor.Annotations = map[string]string{"keyledger.dev/history-format": "uid-rv-v1", "keyledger.dev/source-uid": string(s.UID),
		"keyledger.dev/source-resource-version": s.ResourceVersion, "keyledger.dev/source-name": "occupied",
		"keyledger.dev/source-type": "Opaque", "keyledger.dev/version": "1", "keyledger.dev/snapshot-time": "2026-01-01T00:00:00Z",
		"keyledger.dev/actor": "someone/else"}
	e.createSecret(impostor)
	r := e.runCmd(updateCommand(e.ns, "occupied", s.ResourceVersion, "mut-occ", map[string][]byte{"k": vCanary("n")}), as)
	requireRefused(t, r, "slot-occupied")
	require.Equal(t, s.ResourceVersion, e.getSecret("occupied").ResourceVersion)
	assertNoCanary(t, r.Stdout+r.Stderr, vCanary("o"), vCanary("evil"), vCanary("n"))

	// Size guard: 780 KiB raw is over 1 MiB as base64: exit 64, nothing written.
	big := e.createSecret(plainSecret("big", map[string][]byte{"blob": make([]byte, 780<<10)}))
	url, connections := pgListener(t)
	r = e.runCmd(updateCommand(e.ns, "big", big.ResourceVersion, "mut-big", map[string][]byte{"k": vCanary("b")}), as, withDatabase(url))
	require.Equal(t, 64, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Contains(t, outcome(t, r)["error"], "guard")
	require.Zero(t, connections.Load())
	require.Equal(t, big.ResourceVersion, e.getSecret("big").ResourceVersion)
	require.Empty(t, e.snapshotsOf(big.UID))

	// ServiceAccount token Secrets are refused.
	tok := plainSecret("sa-token", map[string][]byte{"extra": vCanary("s")})
	tok.Type = corev1.SecretTypeServiceAccountToken
	tok.Annotations = map[string]string{"kubernetes.io/service-account.name": "default"}
	tokS := e.createSecret(tok)
	requireRefused(t, e.runCmd(updateCommand(e.ns, "sa-token", tokS.ResourceVersion, "mut-tok", map[string][]byte{"extra": vCanary("s2")}), as), "service-account-token")

	// Restore into an immutable Secret: refused unless byte-identical.
	for _, tc := range []struct {
		name   string
		update []byte
		want   string
	}{{"frozen", vCanary("f2"), "immutable"}, {"same", vCanary("f1"), "existing"}} {
		f := e.createSecret(plainSecret(tc.name, map[string][]byte{"k": vCanary("f1")}))
		requireOK(t, e.runCmd(updateCommand(e.ns, tc.name, f.ResourceVersion, "mut-"+tc.name, map[string][]byte{"k": tc.update}), as), "completed")
		cur := e.getSecret(tc.name)
		cur.Immutable = &yes
		cur, err := e.kube.Client().CoreV1().Secrets(e.ns).Update(t.Context(), cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		r := e.runCmd(restoreCommand(e.ns, tc.name, cur.ResourceVersion, "mut-restore-"+tc.name, 1), as)
		if tc.want == "existing" {
			requireOK(t, r, "existing")
		} else {
			requireRefused(t, r, tc.want)
		}
		require.Equal(t, cur.ResourceVersion, e.getSecret(tc.name).ResourceVersion)
	}

	// A command file holding values must be private.
	path := e.writeCommand("public.json", updateCommand(e.ns, "same", "1", "mut-public", map[string][]byte{"k": vCanary("p")}))
	require.NoError(t, os.Chmod(path, 0o644))
	r = e.keyledger([]string{"run", path}, as)
	require.Equal(t, 64, r.Code)
	require.Contains(t, outcome(t, r)["error"], "not-private")
}

func TestIntegrationVersionedConcurrentUpdates(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("race")
	s := e.createSecret(plainSecret("race", map[string][]byte{"k": vCanary("r0")}))
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.runCmd(updateCommand(e.ns, "race", s.ResourceVersion, fmt.Sprintf("mut-race-%d", i), map[string][]byte{"k": vCanary(fmt.Sprint("r", i+1))}), as)
		}()
	}
	wg.Wait()
	codes := []int{results[0].Code, results[1].Code}
	require.ElementsMatch(t, []int{0, 2}, codes, "%v", results)
	winner, loser := 0, results[1]
	if results[0].Code != 0 {
		winner, loser = 1, results[0]
	}
	require.Contains(t, []any{"changed-concurrently", "stale-resource-version"}, outcome(t, loser)["reason"])
	after := e.getSecret("race")
	require.Equal(t, vCanary(fmt.Sprint("r", winner+1)), after.Data["k"])
	require.Equal(t, "2", after.Annotations["keyledger.dev/version"])
	require.Equal(t, 1, e.secretWrites("race", s.ResourceVersion, after.ResourceVersion))
	// The one snapshot of v1 is the exact source state, whichever run took it.
	require.Equal(t, []string{"1"}, e.versionsOf(s.UID))
	e.requireSnapshot(s, 1, "")
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
	as := e.asWriter(names...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "lost-" + tc.name
			limit := withEnv("KEYLEDGER_HISTORY_LIMIT=1")
			fault := withEnv("KEYLEDGER_FAULT=" + tc.fault)
			mutation := "mut-" + name
			var s *corev1.Secret
			var r result
			switch tc.kind {
			case "create":
				r = e.runCmd(updateCommand(e.ns, name, "", mutation, map[string][]byte{"k": vCanary("c")}), as, fault)
			case "delete":
				s = e.createSecret(plainSecret(name, map[string][]byte{"k": vCanary("d")}))
				r = e.runCmd(deleteCommand(e.ns, name, s.ResourceVersion, mutation, true), as, fault)
			default:
				// One update first, so the next one has a snapshot to prune.
				s0 := e.createSecret(plainSecret(name, map[string][]byte{"k": vCanary("0")}))
				requireOK(t, e.runCmd(updateCommand(e.ns, name, s0.ResourceVersion, mutation+"-pre", map[string][]byte{"k": vCanary("1")}), as, limit), "completed")
				s = e.getSecret(name)
				r = e.runCmd(updateCommand(e.ns, name, s.ResourceVersion, mutation, map[string][]byte{"k": vCanary("2")}), as, limit, fault)
			}
			requireOK(t, r, tc.outcome)
			_, records := e.journalOf(mutation)
			require.Equal(t, tc.calls, count(records, store.RecordAuthorityCall), "%v", kinds(records))
			require.GreaterOrEqual(t, count(records, store.RecordResolution), 1, "settled by re-reading")
			switch tc.kind {
			case "create":
				live := e.getSecret(name)
				require.Equal(t, "1", live.Annotations["keyledger.dev/version"])
				require.Equal(t, vCanary("c"), live.Data["k"])
			case "delete":
				_, err := e.kube.Client().CoreV1().Secrets(e.ns).Get(t.Context(), name, metav1.GetOptions{})
				require.Error(t, err)
				require.Empty(t, e.snapshotsOf(s.UID), "keepHistory: no snapshot is made")
			default:
				after := e.getSecret(name)
				require.Equal(t, vCanary("2"), after.Data["k"])
				require.Equal(t, "3", after.Annotations["keyledger.dev/version"])
				require.Equal(t, 1, e.secretWrites(name, s.ResourceVersion, after.ResourceVersion), "one live write")
				require.Equal(t, []string{"2"}, e.versionsOf(s.UID), "one snapshot, the oldest pruned")
				e.requireSnapshot(s, 2, mutation)
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
	as := e.asWriter(names...)
	limit := withEnv("KEYLEDGER_HISTORY_LIMIT=1")
	for i, fp := range crashes {
		t.Run(fp, func(t *testing.T) {
			name := names[i]
			s0 := e.createSecret(plainSecret(name, map[string][]byte{"k": vCanary("0")}))
			requireOK(t, e.runCmd(updateCommand(e.ns, name, s0.ResourceVersion, "mut-pre-"+name, map[string][]byte{"k": vCanary("1")}), as, limit), "completed")
			s := e.getSecret(name)
			cmd := updateCommand(e.ns, name, s.ResourceVersion, "mut-"+name, map[string][]byte{"k": vCanary("2")})
			r := e.runCmd(cmd, as, limit, withFailpoint(fp))
			require.Equal(t, 137, r.Code, "must die at %s: %s %s", fp, r.Stdout, r.Stderr)
			r = e.runCmd(cmd, as, limit)
			require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
			require.Contains(t, []any{"completed", "converged", "existing"}, outcome(t, r)["outcome"])
			after := e.getSecret(name)
			require.Equal(t, vCanary("2"), after.Data["k"])
			require.Equal(t, "3", after.Annotations["keyledger.dev/version"], "no lost version")
			require.Equal(t, 1, e.secretWrites(name, s.ResourceVersion, after.ResourceVersion), "one live write")
			require.Equal(t, []string{"2"}, e.versionsOf(s.UID), "no duplicate snapshot, the oldest pruned")
			e.requireSnapshot(s, 2, "mut-"+name)
			op, records := e.journalOf("mut-" + name)
			require.Equal(t, store.StateCompleted, op.State)
			require.Equal(t, 1, count(records, store.RecordCompletion))
		})
	}
}

func TestIntegrationVersionedRecreatedName(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.asWriter("phoenix")
	old := e.createSecret(plainSecret("phoenix", map[string][]byte{"k": vCanary("old0")}))
	requireOK(t, e.runCmd(updateCommand(e.ns, "phoenix", old.ResourceVersion, "mut-old-1", map[string][]byte{"k": vCanary("old1")}), as), "completed")
	old1 := e.getSecret("phoenix")
	requireOK(t, e.runCmd(updateCommand(e.ns, "phoenix", old1.ResourceVersion, "mut-old-2", map[string][]byte{"k": vCanary("old2")}), as), "completed")
	// Deleted behind keyledger's back and recreated: a new UID, a new lifetime.
	require.NoError(t, e.kube.Client().CoreV1().Secrets(e.ns).Delete(t.Context(), "phoenix", metav1.DeleteOptions{}))
	fresh := e.createSecret(plainSecret("phoenix", map[string][]byte{"k": vCanary("new0")}))
	require.NotEqual(t, old.UID, fresh.UID)

	limit := withEnv("KEYLEDGER_HISTORY_LIMIT=1")
	requireOK(t, e.runCmd(updateCommand(e.ns, "phoenix", fresh.ResourceVersion, "mut-new-1", map[string][]byte{"k": vCanary("new1")}), as, limit), "completed")
	new1 := e.getSecret("phoenix")
	require.Equal(t, "2", new1.Annotations["keyledger.dev/version"], "the counter starts again for the new UID")
	requireOK(t, e.runCmd(updateCommand(e.ns, "phoenix", new1.ResourceVersion, "mut-new-2", map[string][]byte{"k": vCanary("new2")}), as, limit), "completed")
	require.Equal(t, []string{"1", "2"}, e.versionsOf(old.UID), "the predecessor's snapshots are never pruned")
	require.Equal(t, []string{"2"}, e.versionsOf(fresh.UID))

	h := e.keyledger([]string{"history", e.ns + "/phoenix", "-o", "json"}, as)
	require.Equal(t, 0, h.Code, h.Stderr)
	var hist versioned.History
	require.NoError(t, json.Unmarshal([]byte(h.Stdout), &hist))
	require.Len(t, hist.Versions, 1, "only the current UID's history is listed")
	require.Equal(t, fresh.UID, hist.UID)

	// Version 1 exists only for the predecessor: never restored through the new UID.
	new2 := e.getSecret("phoenix")
	requireRefused(t, e.runCmd(restoreCommand(e.ns, "phoenix", new2.ResourceVersion, "mut-new-r1", 1), as), "version-absent")
	requireOK(t, e.runCmd(restoreCommand(e.ns, "phoenix", new2.ResourceVersion, "mut-new-r2", 2), as), "completed")
	require.Equal(t, vCanary("new1"), e.getSecret("phoenix").Data["k"])
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
			s := e.createSecret(plainSecret(name, map[string][]byte{"k": vCanary("m")}))
			rules := versionedRules(name)
			tc.edit(rules)
			kubeconfig := e.serviceAccountKubeconfig("matrix-"+fmt.Sprint(i), rules)
			url, connections := pgListener(t)
			r := e.runCmd(updateCommand(e.ns, name, s.ResourceVersion, "mut-"+name, map[string][]byte{"k": vCanary("n")}), asKubeconfig(kubeconfig), withDatabase(url))
			require.Equal(t, 77, r.Code, "%s %s", r.Stdout, r.Stderr)
			require.Equal(t, "permission-mismatch", outcome(t, r)["reason"])
			require.Zero(t, connections.Load(), "PostgreSQL is never contacted")
			require.Equal(t, s.ResourceVersion, e.getSecret(name).ResourceVersion)
		})
	}
}
