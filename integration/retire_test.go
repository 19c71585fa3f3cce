package integration

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/retire/keyring/keyringtest"
)

// requireRetired checks the Secret holds m minus keyID, with this
// mutation's receipt, one generation up, annotations in step.
func requireRetired(t *testing.T, s *corev1.Secret, keyID, mutation string, before *keyring.Manifest) *keyring.Manifest {
	t.Helper()
	m, err := keyring.Parse(s.Data[dataKey])
	require.NoError(t, err)
	_, present := m.Key(keyID)
	require.False(t, present, "the retired key's material is gone")
	r, ok := m.Receipt(keyID)
	require.True(t, ok, "a receipt is left")
	require.Equal(t, mutation, r.MutationID)
	require.Equal(t, "ret-"+mutation, r.RetirementID)
	require.Equal(t, keyring.MaterialDigest(keyringtest.Material(keyID)), r.MaterialDigest)
	require.Equal(t, before.Generation+1, m.Generation)
	require.Equal(t, m.Generation, r.Generation)
	require.Equal(t, fmt.Sprint(m.Generation), s.Annotations["keyledger.dev/generation"])
	require.Equal(t, m.CatalogDigest(), s.Annotations["keyledger.dev/catalog-digest"])
	for _, k := range before.Keys {
		if k.ID == keyID {
			continue
		}
		kept, ok := m.Key(k.ID)
		require.True(t, ok, "key %s kept", k.ID)
		require.Equal(t, []byte(k.Material), []byte(kept.Material), "key %s material untouched", k.ID)
	}
	return m
}

func TestIntegrationRetireHappyPathThenReplay(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := standardKeyring()
	s := e.createSecret(keyringSecret("prompt-output-keyring", before))
	path := e.writeCommand("retire.json", retireCommand(s, "k-2026-07", "mut-7"))

	r := e.keyledger([]string{"run", path}, e.asRetirerOf(s))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := outcome(t, r)
	require.Equal(t, "completed", out["outcome"])
	require.Equal(t, "KeyRetirement", out["kind"])
	require.Equal(t, "mut-7", out["mutationId"])
	after := e.getSecret(s.Name)
	m := requireRetired(t, after, "k-2026-07", "mut-7", before)
	require.Equal(t, map[string]any{"namespace": e.ns, "name": s.Name, "uid": string(s.UID)}, out["secret"])
	require.EqualValues(t, m.Generation, out["generation"])
	require.Equal(t, m.CatalogDigest(), out["catalogDigest"])
	require.Equal(t, 1, e.secretWrites(s.Name, s.ResourceVersion, after.ResourceVersion))
	require.Equal(t, 1, strings.Count(r.Stdout, "\n"), "exactly one line on stdout")
	require.NotContains(t, r.Stdout, path, "no file path on stdout")

	// Exact replay: nothing written.
	r = e.keyledger([]string{"run", path}, e.asRetirerOf(s))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, "existing", outcome(t, r)["outcome"])
	require.Equal(t, after.ResourceVersion, e.getSecret(s.Name).ResourceVersion, "replay writes nothing")

	// The journal shows the steps, in order.
	op, records := e.journalOf("mut-7")
	require.Equal(t, store.StateCompleted, op.State)
	require.Equal(t, []store.RecordKind{store.RecordPreparation, store.RecordObservation, store.RecordAuthorityCall,
		store.RecordAuthorityResult, store.RecordCompletion}, kinds(records))
	call := records[2]
	require.Equal(t, s.ResourceVersion, call.ResourceVersion, "the call's precondition is the resourceVersion read")
	require.Equal(t, string(s.UID), call.UID)
	require.Equal(t, m.CatalogDigest(), call.Digest, "the intended catalog digest is journaled before the call")

	// A lost journal completion with the Secret already retired: a new
	// journal (another database) finds our receipt and reports existing.
	fresh, err := shared.pg.NewJournal(t.Context(), "kl_"+randomSuffix(t), e.ns)
	require.NoError(t, err)
	r = e.keyledger([]string{"run", path}, e.asRetirerOf(s), withDatabase(fresh.OperatorURL))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, "existing", outcome(t, r)["outcome"])
	require.Equal(t, after.ResourceVersion, e.getSecret(s.Name).ResourceVersion)

	// journal show / list and keyring inspect print content-free facts.
	show := e.keyledger([]string{"journal", "show", "mut-7", "-o", "json"})
	require.Equal(t, 0, show.Code, show.Stderr)
	require.Contains(t, show.Stdout, `"state":"completed"`)
	require.Contains(t, show.Stdout, `"step":"replace-keyring","target":"secret/prompt-output-keyring","attempt":1`)
	list := e.keyledger([]string{"journal", "list"})
	require.Equal(t, 0, list.Code, list.Stderr)
	require.Contains(t, list.Stdout, "mut-7")
	inspect := e.keyledger([]string{"keyring", "inspect", e.ns + "/" + s.Name})
	require.Equal(t, 0, inspect.Code, inspect.Stderr)
	require.Equal(t, string(m.Catalog())+"\n", inspect.Stdout)
	for _, out := range []result{r, show, list, inspect} {
		keyringtest.AssertNoMaterial(t, out.Stdout+out.Stderr, allMaterial()...)
	}
}

func TestIntegrationRetireConcurrentSameCommand(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := standardKeyring()
	s := e.createSecret(keyringSecret("keyring", before))
	path := e.writeCommand("retire.json", retireCommand(s, "k-2026-06", "mut-same"))
	results := make([]result, 16)
	as := e.asRetirerOf(s)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = e.keyledger([]string{"run", path}, as) }()
	}
	wg.Wait()
	for i, r := range results {
		require.Equal(t, 0, r.Code, "run %d: %s %s", i, r.Stdout, r.Stderr)
		require.Contains(t, []any{"completed", "existing", "converged"}, outcome(t, r)["outcome"])
	}
	after := e.getSecret(s.Name)
	requireRetired(t, after, "k-2026-06", "mut-same", before)
	require.Equal(t, 1, e.secretWrites(s.Name, s.ResourceVersion, after.ResourceVersion), "exactly one write among 16 runs")
	op, records := e.journalOf("mut-same")
	require.Equal(t, store.StateCompleted, op.State)
	require.Equal(t, 1, count(records, store.RecordCompletion))
}

func TestIntegrationRetireCompetingCommands(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := standardKeyring()
	s := e.createSecret(keyringSecret("keyring", before))
	a := e.writeCommand("a.json", retireCommand(s, "k-2026-07", "mut-a"))
	b := e.writeCommand("b.json", retireCommand(s, "k-2026-07", "mut-b"))
	var ra, rb result
	as := e.asRetirerOf(s)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ra = e.keyledger([]string{"run", a}, as) }()
	go func() { defer wg.Done(); rb = e.keyledger([]string{"run", b}, as) }()
	wg.Wait()
	codes := []int{ra.Code, rb.Code}
	require.ElementsMatch(t, []int{0, 2}, codes, "one wins, the other refuses: %s %s / %s %s", ra.Stdout, ra.Stderr, rb.Stdout, rb.Stderr)
	winner, loser := "mut-a", rb
	if ra.Code != 0 {
		winner, loser = "mut-b", ra
	}
	require.Contains(t, []any{"receipt-conflict", "changed-concurrently"}, outcome(t, loser)["reason"])
	after := e.getSecret(s.Name)
	requireRetired(t, after, "k-2026-07", winner, before)
	require.Equal(t, 1, e.secretWrites(s.Name, s.ResourceVersion, after.ResourceVersion))
}

func TestIntegrationRetireCrashAtEveryTransition(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name    string
		crashes []string
		calls   int
	}{
		{"after-prepare", []string{"after-prepare"}, 1},
		{"after-call", []string{"after-call"}, 2},
		{"after-send", []string{"after-send"}, 1},
		{"after-complete", []string{"after-complete"}, 1},
		{"after-send-then-resolve", []string{"after-send", "after-resolve"}, 1},
		{"after-call-then-resolve", []string{"after-call", "after-resolve"}, 2},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := standardKeyring()
			s := e.createSecret(keyringSecret(fmt.Sprintf("keyring-%d", i), before))
			mutation := fmt.Sprintf("mut-crash-%d", i)
			path := e.writeCommand(mutation+".json", retireCommand(s, "k-2026-07", mutation))
			for _, fp := range tc.crashes {
				r := e.keyledger([]string{"run", path}, e.asRetirerOf(s), withFailpoint(fp))
				require.Equal(t, 137, r.Code, "must die at %s: %s %s", fp, r.Stdout, r.Stderr)
			}
			r := e.keyledger([]string{"run", path}, e.asRetirerOf(s))
			require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
			after := e.getSecret(s.Name)
			requireRetired(t, after, "k-2026-07", mutation, before)
			require.Equal(t, 1, e.secretWrites(s.Name, s.ResourceVersion, after.ResourceVersion), "one write")
			op, records := e.journalOf(mutation)
			require.Equal(t, store.StateCompleted, op.State)
			require.Equal(t, 1, count(records, store.RecordCompletion), "one completion")
			require.Equal(t, tc.calls, count(records, store.RecordAuthorityCall), "%v", kinds(records))
		})
	}
}

func TestIntegrationRetireLostResponse(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		fault, outcome string
		calls          int
	}{
		{"drop-response:PUT:/secrets/#1", "converged", 1}, // applied, answer dropped
		{"server-error:PUT:/secrets/#1", "converged", 1},  // applied, answered 503
		{"reset:PUT:/secrets/#1", "completed", 2},         // never sent: resolution re-sends the same CAS
	}
	for i, tc := range cases {
		e.retireUnderFault(t, fmt.Sprintf("keyring-%d", i), fmt.Sprintf("mut-lost-%d", i), tc.fault, tc.outcome, tc.calls)
	}
}

// retireUnderFault retires a key from a fresh keyring name with
// KEYLEDGER_FAULT=fault on the run and requires what every lost or refused
// answer must leave: exit 0 with outcome, the key retired by exactly one
// applied write, calls journaled calls, and one resolution (settled by
// re-reading). It returns the run's result for further checks.
func (e *env) retireUnderFault(t *testing.T, name, mutation, fault, want string, calls int) result {
	t.Helper()
	before := standardKeyring()
	s := e.createSecret(keyringSecret(name, before))
	path := e.writeCommand(mutation+".json", retireCommand(s, "k-2026-06", mutation))
	r := e.keyledger([]string{"run", path}, e.asRetirerOf(s), withEnv("KEYLEDGER_FAULT="+fault))
	require.Equal(t, 0, r.Code, "%s: %s %s", fault, r.Stdout, r.Stderr)
	require.Equal(t, want, outcome(t, r)["outcome"], fault)
	after := e.getSecret(s.Name)
	requireRetired(t, after, "k-2026-06", mutation, before)
	require.Equal(t, 1, e.secretWrites(s.Name, s.ResourceVersion, after.ResourceVersion), "%s: one write applied", fault)
	_, records := e.journalOf(mutation)
	require.Equal(t, calls, count(records, store.RecordAuthorityCall), "%s: %v", fault, kinds(records))
	require.Equal(t, 1, count(records, store.RecordResolution), "%s: settled by re-reading", fault)
	return r
}

func TestIntegrationRetireRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	big := standardKeyring()
	cases := []struct {
		name   string
		secret secretOption
		keyID  string
		spec   func(map[string]any)
		reason string
	}{
		{name: "active-key", keyID: "k-2026-08", reason: "key-active"},
		{name: "absent-key", keyID: "k-2025-01", reason: "key-absent", spec: func(s map[string]any) {
			s["expectedMaterialDigest"] = keyring.MaterialDigest(keyringtest.Material("k-2025-01"))
		}},
		{name: "wrong-digest", keyID: "k-2026-07", reason: "material-digest-mismatch", spec: func(s map[string]any) {
			s["expectedMaterialDigest"] = keyring.MaterialDigest([]byte("something else"))
		}},
		{name: "drifted-annotations", keyID: "k-2026-07", reason: "catalog-drifted", secret: func(s *corev1.Secret) {
			s.Annotations["keyledger.dev/generation"] = "3"
		}},
		{name: "immutable", keyID: "k-2026-07", reason: "immutable", secret: func(s *corev1.Secret) {
			yes := true
			s.Immutable = &yes
		}},
		{name: "two-data-entries", keyID: "k-2026-07", reason: "data-entries", secret: func(s *corev1.Secret) {
			s.Data["extra"] = []byte("x")
		}},
		{name: "oversize-manifest", keyID: "k-2026-07", reason: "too-large", secret: func(s *corev1.Secret) {
			s.Data[dataKey] = append(big.Encode(), make([]byte, keyring.MaxManifestBytes)...)
		}},
		{name: "last-applied", keyID: "k-2026-07", reason: "last-applied-present", secret: func(s *corev1.Secret) {
			s.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
		}},
		{name: "not-managed", keyID: "k-2026-07", reason: "not-managed", secret: func(s *corev1.Secret) {
			delete(s.Labels, "keyledger.dev/keyring")
		}},
		{name: "non-canonical", keyID: "k-2026-07", reason: "non-canonical", secret: func(s *corev1.Secret) {
			s.Data[dataKey] = append(s.Data[dataKey], '\n')
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []secretOption
			if tc.secret != nil {
				opts = append(opts, tc.secret)
			}
			s := e.createSecret(keyringSecret(fmt.Sprintf("refuse-%d", i), standardKeyring(), opts...))
			var specOpts []func(map[string]any)
			if tc.spec != nil {
				specOpts = append(specOpts, tc.spec)
			}
			mutation := "mut-refuse-" + tc.name
			path := e.writeCommand(mutation+".json", retireCommand(s, tc.keyID, mutation, specOpts...))
			r := e.keyledger([]string{"run", path}, e.asRetirerOf(s))
			require.Equal(t, 2, r.Code, "%s %s", r.Stdout, r.Stderr)
			require.Equal(t, tc.reason, outcome(t, r)["reason"])
			require.Equal(t, s.ResourceVersion, e.getSecret(s.Name).ResourceVersion, "nothing written")
			op, records := e.journalOf(mutation)
			require.Equal(t, store.StateRefused, op.State)
			require.Equal(t, tc.reason, op.Reason, "the journal says why")
			require.Equal(t, 0, count(records, store.RecordAuthorityCall))
			keyringtest.AssertNoMaterial(t, r.Stdout+r.Stderr, allMaterial()...)
		})
	}

	t.Run("recreated-with-new-uid", func(t *testing.T) {
		s := e.createSecret(keyringSecret("recreated", standardKeyring()))
		path := e.writeCommand("recreated.json", retireCommand(s, "k-2026-07", "mut-recreated"))
		require.NoError(t, e.kube.Client().CoreV1().Secrets(e.ns).Delete(t.Context(), s.Name, metav1.DeleteOptions{}))
		again := e.createSecret(keyringSecret("recreated", standardKeyring()))
		require.NotEqual(t, s.UID, again.UID)
		r := e.keyledger([]string{"run", path}, e.asRetirerOf(s))
		require.Equal(t, 2, r.Code, "%s %s", r.Stdout, r.Stderr)
		require.Equal(t, "uid-changed", outcome(t, r)["reason"])
		require.Equal(t, again.ResourceVersion, e.getSecret(s.Name).ResourceVersion)
	})

	t.Run("reused-mutation-id", func(t *testing.T) {
		s := e.createSecret(keyringSecret("reuse", standardKeyring()))
		first := e.writeCommand("first.json", retireCommand(s, "k-2026-06", "mut-reuse"))
		require.Equal(t, 0, e.keyledger([]string{"run", first}, e.asRetirerOf(s)).Code)
		other := e.writeCommand("other.json", retireCommand(s, "k-2026-07", "mut-reuse"))
		r := e.keyledger([]string{"run", other}, e.asRetirerOf(s))
		require.Equal(t, 2, r.Code, "%s %s", r.Stdout, r.Stderr)
		require.Equal(t, "mutation-id-reused", outcome(t, r)["reason"])
	})
}

// pgListener is a loopback TCP listener standing in for PostgreSQL: it
// counts connection attempts, to prove a run never contacted the database.
func pgListener(t *testing.T) (url string, connections *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	connections = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			connections.Add(1)
			c.Close()
		}
	}()
	return "postgres://nobody:nothing@" + l.Addr().String() + "/journal?sslmode=disable", connections
}

func TestIntegrationRetirePermissionMatrix(t *testing.T) {
	t.Parallel()
	e := setup(t)
	exact := retirementRules
	cases := []struct {
		name  string
		rules func(secret string) []rbacv1.PolicyRule
		code  int
	}{
		{"exact", exact, 0},
		{"widened-with-list", func(n string) []rbacv1.PolicyRule {
			r := exact(n)
			r[0].Verbs = append(r[0].Verbs, "list")
			return r
		}, 77},
		{"widened-with-patch", func(n string) []rbacv1.PolicyRule {
			r := exact(n)
			r[0].Verbs = append(r[0].Verbs, "patch")
			return r
		}, 77},
		{"wildcard-resource-name", func(n string) []rbacv1.PolicyRule {
			r := exact(n)
			r[0].ResourceNames = nil
			return r
		}, 77},
		{"second-secret-name", func(n string) []rbacv1.PolicyRule {
			r := exact(n)
			r[0].ResourceNames = append(r[0].ResourceNames, "another-keyring")
			return r
		}, 77},
		{"second-rule-on-another-secret", func(n string) []rbacv1.PolicyRule {
			return append(exact(n), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
				ResourceNames: []string{"database-password"}, Verbs: []string{"get"}})
		}, 77},
		{"missing-update", func(n string) []rbacv1.PolicyRule {
			r := exact(n)
			r[0].Verbs = []string{"get"}
			return r
		}, 77},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := standardKeyring()
			s := e.createSecret(keyringSecret(fmt.Sprintf("matrix-%d", i), before))
			kubeconfig := e.serviceAccountKubeconfig(fmt.Sprintf("retirer-%d", i), tc.rules(s.Name))
			mutation := "mut-matrix-" + tc.name
			path := e.writeCommand(mutation+".json", retireCommand(s, "k-2026-07", mutation))
			if tc.code == 0 {
				r := e.keyledger([]string{"run", path}, asKubeconfig(kubeconfig))
				require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
				requireRetired(t, e.getSecret(s.Name), "k-2026-07", mutation, before)
				return
			}
			url, connections := pgListener(t)
			r := e.keyledger([]string{"run", path}, asKubeconfig(kubeconfig), withDatabase(url))
			require.Equal(t, 77, r.Code, "%s %s", r.Stdout, r.Stderr)
			require.Equal(t, "permission-mismatch", outcome(t, r)["reason"])
			require.Zero(t, connections.Load(), "PostgreSQL is never contacted")
			require.Equal(t, s.ResourceVersion, e.getSecret(s.Name).ResourceVersion)
		})
	}
}

// Canary material never reaches stdout, stderr or any journal column.
func TestIntegrationRetireNoMaterialAnywhere(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.createSecret(keyringSecret("canary", standardKeyring()))
	var outputs strings.Builder
	for _, mutation := range []string{"mut-canary", "mut-canary-refused"} {
		keyID := "k-2026-07"
		if mutation == "mut-canary-refused" {
			keyID = "k-2026-08" // active: refused
		}
		path := e.writeCommand(mutation+".json", retireCommand(s, keyID, mutation))
		for _, opt := range [][]runOption{{e.asRetirerOf(s)}, {e.asRetirerOf(s), withEnv("KEYLEDGER_LOG_LEVEL=debug")}} {
			r := e.keyledger([]string{"run", path}, opt...)
			outputs.WriteString(r.Stdout + r.Stderr)
		}
		show := e.keyledger([]string{"journal", "show", mutation, "-o", "json"})
		outputs.WriteString(show.Stdout + show.Stderr)
	}
	require.Contains(t, outputs.String(), "mut-canary", "the outputs were captured")
	keyringtest.AssertNoMaterial(t, outputs.String(), allMaterial()...)

	conn := connect(t, e.journal.OwnerURL)
	var dump string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT
		(SELECT coalesce(string_agg(row_to_json(o)::text, E'\n'), '') FROM keyledger.operations o) || E'\n' ||
		(SELECT coalesce(string_agg(row_to_json(r)::text, E'\n'), '') FROM keyledger.records r)`).Scan(&dump))
	require.Contains(t, dump, "mut-canary-refused")
	keyringtest.AssertNoMaterial(t, dump, allMaterial()...)

	// Nor the ServiceAccount token the runs used, nor the journal's DSN.
	kubeconfig, err := clientcmd.LoadFromFile(e.retirers[s.Name])
	require.NoError(t, err)
	for name, auth := range kubeconfig.AuthInfos {
		require.NotEmpty(t, auth.Token, "user %s runs with a token", name)
		require.NotContains(t, outputs.String()+dump, auth.Token)
	}
	dsn, err := url.Parse(e.journal.OperatorURL)
	require.NoError(t, err)
	password, _ := dsn.User.Password()
	require.NotEmpty(t, password)
	require.NotContains(t, outputs.String()+dump, password)
	require.NotContains(t, outputs.String()+dump, e.journal.OperatorURL)
}

// A malformed command file is refused with 64 and a message naming the field.
func TestIntegrationRetireInvalidCommand(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.createSecret(keyringSecret("invalid", standardKeyring()))
	cmd := retireCommand(s, "k-2026-07", "mut-invalid", func(spec map[string]any) { spec["keyID"] = "typo" })
	r := e.keyledger([]string{"run", e.writeCommand("bad.json", cmd)})
	require.Equal(t, 64, r.Code)
	require.Contains(t, outcome(t, r)["error"], "spec.keyID")
	r = e.keyledger([]string{"run", "relative.json"})
	require.Equal(t, 64, r.Code)
}

// A compare-and-set that never reaches the API server is re-sent a bounded
// number of times, then the run exits 75; the next run settles it.
func TestIntegrationRetireUncertainThenRerun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := standardKeyring()
	s := e.createSecret(keyringSecret("keyring", before))
	path := e.writeCommand("retire.json", retireCommand(s, "k-2026-06", "mut-uncertain"))
	r := e.keyledger([]string{"run", path}, e.asRetirerOf(s), withEnv("KEYLEDGER_FAULT=reset:PUT:/secrets/#0"))
	require.Equal(t, 75, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, "uncertain", outcome(t, r)["outcome"])
	require.Equal(t, s.ResourceVersion, e.getSecret(s.Name).ResourceVersion, "nothing reached the API server")
	op, records := e.journalOf("mut-uncertain")
	require.Equal(t, store.StateResolving, op.State)
	require.Equal(t, 3, count(records, store.RecordAuthorityCall), "bounded: three sends in one run")

	r = e.keyledger([]string{"run", path}, e.asRetirerOf(s))
	require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, "completed", outcome(t, r)["outcome"])
	after := e.getSecret(s.Name)
	requireRetired(t, after, "k-2026-06", "mut-uncertain", before)
	require.Equal(t, 1, e.secretWrites(s.Name, s.ResourceVersion, after.ResourceVersion))
	op, records = e.journalOf("mut-uncertain")
	require.Equal(t, store.StateCompleted, op.State)
	require.Equal(t, 4, count(records, store.RecordAuthorityCall), "attempt numbers continue across runs")
}
