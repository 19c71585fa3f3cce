package integration

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/retire/keyring/keyringtest"
)

func TestIntegrationRetireHappyPathThenReplay(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := suite.StandardKeyring()
	s := e.CreateSecret(suite.KeyringSecret("prompt-output-keyring", before))
	path := e.WriteCommand("retire.json", suite.RetireCommand(s, "k-2026-07", "mut-7"))

	r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := suite.Outcome(t, r)
	require.Equal(t, "completed", out["outcome"])
	require.Equal(t, "KeyRetirement", out["kind"])
	require.Equal(t, "mut-7", out["mutationId"])
	after := e.GetSecret(s.Name)
	m := suite.RequireRetired(t, after, "k-2026-07", "mut-7", before)
	require.Equal(t, map[string]any{"namespace": e.NS, "name": s.Name, "uid": string(s.UID)}, out["secret"])
	require.EqualValues(t, m.Generation, out["generation"])
	require.Equal(t, m.CatalogDigest(), out["catalogDigest"])
	require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, after.ResourceVersion))
	require.Equal(t, 1, strings.Count(r.Stdout, "\n"), "exactly one line on stdout")
	require.NotContains(t, r.Stdout, path, "no file path on stdout")

	// Exact replay: nothing written.
	r = e.Keyledger([]string{"run", path}, e.AsRetirerOf(s))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, "existing", suite.Outcome(t, r)["outcome"])
	require.Equal(t, after.ResourceVersion, e.GetSecret(s.Name).ResourceVersion, "replay writes nothing")

	// The journal shows the steps, in order.
	op, records := e.JournalOf("mut-7")
	require.Equal(t, store.StateCompleted, op.State)
	require.Equal(t, []store.RecordKind{store.RecordPreparation, store.RecordObservation, store.RecordAuthorityCall,
		store.RecordAuthorityResult, store.RecordCompletion}, suite.Kinds(records))
	call := records[2]
	require.Equal(t, s.ResourceVersion, call.ResourceVersion, "the call's precondition is the resourceVersion read")
	require.Equal(t, string(s.UID), call.UID)
	require.Equal(t, m.CatalogDigest(), call.Digest, "the intended catalog digest is journaled before the call")

	// A lost journal completion with the Secret already retired: a new
	// journal (another database) finds our receipt and reports existing.
	fresh, err := suite.Postgres().NewJournal(t.Context(), "kl_"+suite.RandomSuffix(t), e.NS)
	require.NoError(t, err)
	r = e.Keyledger([]string{"run", path}, e.AsRetirerOf(s), suite.WithDatabase(fresh.OperatorURL))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, "existing", suite.Outcome(t, r)["outcome"])
	require.Equal(t, after.ResourceVersion, e.GetSecret(s.Name).ResourceVersion)

	// journal show / list and keyring inspect print content-free facts.
	show := e.Keyledger([]string{"journal", "show", "mut-7", "-o", "json"})
	require.Equal(t, 0, show.Code, show.Stderr)
	require.Contains(t, show.Stdout, `"state":"completed"`)
	require.Contains(t, show.Stdout, `"step":"replace-keyring","target":"secret/prompt-output-keyring","attempt":1`)
	list := e.Keyledger([]string{"journal", "list"})
	require.Equal(t, 0, list.Code, list.Stderr)
	require.Contains(t, list.Stdout, "mut-7")
	inspect := e.Keyledger([]string{"keyring", "inspect", e.NS + "/" + s.Name})
	require.Equal(t, 0, inspect.Code, inspect.Stderr)
	require.Equal(t, string(m.Catalog())+"\n", inspect.Stdout)
	for _, out := range []suite.Result{r, show, list, inspect} {
		keyringtest.AssertNoMaterial(t, out.Stdout+out.Stderr, suite.AllMaterial()...)
	}
}

func TestIntegrationRetireConcurrentSameCommand(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := suite.StandardKeyring()
	s := e.CreateSecret(suite.KeyringSecret("keyring", before))
	path := e.WriteCommand("retire.json", suite.RetireCommand(s, "k-2026-06", "mut-same"))
	results := make([]suite.Result, 16)
	as := e.AsRetirerOf(s)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = e.Keyledger([]string{"run", path}, as) }()
	}
	wg.Wait()
	for i, r := range results {
		require.Equal(t, 0, r.Code, "run %d: %s %s", i, r.Stdout, r.Stderr)
		require.Contains(t, []any{"completed", "existing", "converged"}, suite.Outcome(t, r)["outcome"])
	}
	after := e.GetSecret(s.Name)
	suite.RequireRetired(t, after, "k-2026-06", "mut-same", before)
	require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, after.ResourceVersion), "exactly one write among 16 runs")
	op, records := e.JournalOf("mut-same")
	require.Equal(t, store.StateCompleted, op.State)
	require.Equal(t, 1, suite.Count(records, store.RecordCompletion))
}

func TestIntegrationRetireCompetingCommands(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := suite.StandardKeyring()
	s := e.CreateSecret(suite.KeyringSecret("keyring", before))
	a := e.WriteCommand("a.json", suite.RetireCommand(s, "k-2026-07", "mut-a"))
	b := e.WriteCommand("b.json", suite.RetireCommand(s, "k-2026-07", "mut-b"))
	var ra, rb suite.Result
	as := e.AsRetirerOf(s)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ra = e.Keyledger([]string{"run", a}, as) }()
	go func() { defer wg.Done(); rb = e.Keyledger([]string{"run", b}, as) }()
	wg.Wait()
	codes := []int{ra.Code, rb.Code}
	require.ElementsMatch(t, []int{0, 2}, codes, "one wins, the other refuses: %s %s / %s %s", ra.Stdout, ra.Stderr, rb.Stdout, rb.Stderr)
	winner, loser := "mut-a", rb
	if ra.Code != 0 {
		winner, loser = "mut-b", ra
	}
	require.Contains(t, []any{"receipt-conflict", "changed-concurrently"}, suite.Outcome(t, loser)["reason"])
	after := e.GetSecret(s.Name)
	suite.RequireRetired(t, after, "k-2026-07", winner, before)
	require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, after.ResourceVersion))
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
			before := suite.StandardKeyring()
			s := e.CreateSecret(suite.KeyringSecret(fmt.Sprintf("keyring-%d", i), before))
			mutation := fmt.Sprintf("mut-crash-%d", i)
			path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, "k-2026-07", mutation))
			for _, fp := range tc.crashes {
				r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s), suite.WithFailpoint(fp))
				require.Equal(t, 137, r.Code, "must die at %s: %s %s", fp, r.Stdout, r.Stderr)
			}
			r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s))
			require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
			after := e.GetSecret(s.Name)
			suite.RequireRetired(t, after, "k-2026-07", mutation, before)
			require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, after.ResourceVersion), "one write")
			op, records := e.JournalOf(mutation)
			require.Equal(t, store.StateCompleted, op.State)
			require.Equal(t, 1, suite.Count(records, store.RecordCompletion), "one completion")
			require.Equal(t, tc.calls, suite.Count(records, store.RecordAuthorityCall), "%v", suite.Kinds(records))
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
		e.RetireUnderFault(t, fmt.Sprintf("keyring-%d", i), fmt.Sprintf("mut-lost-%d", i), tc.fault, tc.outcome, tc.calls)
	}
}

func TestIntegrationRetireRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	big := suite.StandardKeyring()
	cases := []struct {
		name   string
		secret suite.SecretOption
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
			s.Data[suite.DataKey] = append(big.Encode(), make([]byte, keyring.MaxManifestBytes)...)
		}},
		{name: "last-applied", keyID: "k-2026-07", reason: "last-applied-present", secret: func(s *corev1.Secret) {
			s.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
		}},
		{name: "not-managed", keyID: "k-2026-07", reason: "not-managed", secret: func(s *corev1.Secret) {
			delete(s.Labels, "keyledger.dev/keyring")
		}},
		{name: "non-canonical", keyID: "k-2026-07", reason: "non-canonical", secret: func(s *corev1.Secret) {
			s.Data[suite.DataKey] = append(s.Data[suite.DataKey], '\n')
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []suite.SecretOption
			if tc.secret != nil {
				opts = append(opts, tc.secret)
			}
			s := e.CreateSecret(suite.KeyringSecret(fmt.Sprintf("refuse-%d", i), suite.StandardKeyring(), opts...))
			var specOpts []func(map[string]any)
			if tc.spec != nil {
				specOpts = append(specOpts, tc.spec)
			}
			mutation := "mut-refuse-" + tc.name
			path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, tc.keyID, mutation, specOpts...))
			r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s))
			require.Equal(t, 2, r.Code, "%s %s", r.Stdout, r.Stderr)
			require.Equal(t, tc.reason, suite.Outcome(t, r)["reason"])
			require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion, "nothing written")
			op, records := e.JournalOf(mutation)
			require.Equal(t, store.StateRefused, op.State)
			require.Equal(t, tc.reason, op.Reason, "the journal says why")
			require.Equal(t, 0, suite.Count(records, store.RecordAuthorityCall))
			keyringtest.AssertNoMaterial(t, r.Stdout+r.Stderr, suite.AllMaterial()...)
		})
	}

	t.Run("recreated-with-new-uid", func(t *testing.T) {
		s := e.CreateSecret(suite.KeyringSecret("recreated", suite.StandardKeyring()))
		path := e.WriteCommand("recreated.json", suite.RetireCommand(s, "k-2026-07", "mut-recreated"))
		require.NoError(t, e.Kube.Client().CoreV1().Secrets(e.NS).Delete(t.Context(), s.Name, metav1.DeleteOptions{}))
		again := e.CreateSecret(suite.KeyringSecret("recreated", suite.StandardKeyring()))
		require.NotEqual(t, s.UID, again.UID)
		r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s))
		require.Equal(t, 2, r.Code, "%s %s", r.Stdout, r.Stderr)
		require.Equal(t, "uid-changed", suite.Outcome(t, r)["reason"])
		require.Equal(t, again.ResourceVersion, e.GetSecret(s.Name).ResourceVersion)
	})

	t.Run("reused-mutation-id", func(t *testing.T) {
		s := e.CreateSecret(suite.KeyringSecret("reuse", suite.StandardKeyring()))
		first := e.WriteCommand("first.json", suite.RetireCommand(s, "k-2026-06", "mut-reuse"))
		require.Equal(t, 0, e.Keyledger([]string{"run", first}, e.AsRetirerOf(s)).Code)
		other := e.WriteCommand("other.json", suite.RetireCommand(s, "k-2026-07", "mut-reuse"))
		r := e.Keyledger([]string{"run", other}, e.AsRetirerOf(s))
		require.Equal(t, 2, r.Code, "%s %s", r.Stdout, r.Stderr)
		require.Equal(t, "mutation-id-reused", suite.Outcome(t, r)["reason"])
	})
}

func TestIntegrationRetirePermissionMatrix(t *testing.T) {
	t.Parallel()
	e := setup(t)
	exact := suite.RetirementRules
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
			before := suite.StandardKeyring()
			s := e.CreateSecret(suite.KeyringSecret(fmt.Sprintf("matrix-%d", i), before))
			kubeconfig := e.ServiceAccountKubeconfig(fmt.Sprintf("retirer-%d", i), tc.rules(s.Name))
			mutation := "mut-matrix-" + tc.name
			path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, "k-2026-07", mutation))
			if tc.code == 0 {
				r := e.Keyledger([]string{"run", path}, suite.AsKubeconfig(kubeconfig))
				require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
				suite.RequireRetired(t, e.GetSecret(s.Name), "k-2026-07", mutation, before)
				return
			}
			url, connections := suite.PGListener(t)
			r := e.Keyledger([]string{"run", path}, suite.AsKubeconfig(kubeconfig), suite.WithDatabase(url))
			require.Equal(t, 77, r.Code, "%s %s", r.Stdout, r.Stderr)
			require.Equal(t, "permission-mismatch", suite.Outcome(t, r)["reason"])
			require.Zero(t, connections.Load(), "PostgreSQL is never contacted")
			require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion)
		})
	}
}

// Canary material never reaches stdout, stderr or any journal column.
func TestIntegrationRetireNoMaterialAnywhere(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.CreateSecret(suite.KeyringSecret("canary", suite.StandardKeyring()))
	var outputs strings.Builder
	for _, mutation := range []string{"mut-canary", "mut-canary-refused"} {
		keyID := "k-2026-07"
		if mutation == "mut-canary-refused" {
			keyID = "k-2026-08" // active: refused
		}
		path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, keyID, mutation))
		for _, opt := range [][]suite.RunOption{{e.AsRetirerOf(s)}, {e.AsRetirerOf(s), suite.WithEnv("KEYLEDGER_LOG_LEVEL=debug")}} {
			r := e.Keyledger([]string{"run", path}, opt...)
			outputs.WriteString(r.Stdout + r.Stderr)
		}
		show := e.Keyledger([]string{"journal", "show", mutation, "-o", "json"})
		outputs.WriteString(show.Stdout + show.Stderr)
	}
	require.Contains(t, outputs.String(), "mut-canary", "the outputs were captured")
	keyringtest.AssertNoMaterial(t, outputs.String(), suite.AllMaterial()...)

	conn := suite.Connect(t, e.Journal.OwnerURL)
	var dump string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT
		(SELECT coalesce(string_agg(row_to_json(o)::text, E'\n'), '') FROM keyledger.operations o) || E'\n' ||
		(SELECT coalesce(string_agg(row_to_json(r)::text, E'\n'), '') FROM keyledger.records r)`).Scan(&dump))
	require.Contains(t, dump, "mut-canary-refused")
	keyringtest.AssertNoMaterial(t, dump, suite.AllMaterial()...)

	// Nor the ServiceAccount token the runs used, nor the journal's DSN.
	kubeconfig, err := clientcmd.LoadFromFile(e.Retirers[s.Name])
	require.NoError(t, err)
	for name, auth := range kubeconfig.AuthInfos {
		require.NotEmpty(t, auth.Token, "user %s runs with a token", name)
		require.NotContains(t, outputs.String()+dump, auth.Token)
	}
	dsn, err := url.Parse(e.Journal.OperatorURL)
	require.NoError(t, err)
	password, _ := dsn.User.Password()
	require.NotEmpty(t, password)
	require.NotContains(t, outputs.String()+dump, password)
	require.NotContains(t, outputs.String()+dump, e.Journal.OperatorURL)
}

// A malformed command file is refused with 64 and a message naming the field.
func TestIntegrationRetireInvalidCommand(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.CreateSecret(suite.KeyringSecret("invalid", suite.StandardKeyring()))
	cmd := suite.RetireCommand(s, "k-2026-07", "mut-invalid", func(spec map[string]any) { spec["keyID"] = "typo" })
	r := e.Keyledger([]string{"run", e.WriteCommand("bad.json", cmd)})
	require.Equal(t, 64, r.Code)
	require.Contains(t, suite.Outcome(t, r)["error"], "spec.keyID")
	r = e.Keyledger([]string{"run", "relative.json"})
	require.Equal(t, 64, r.Code)
}

// A compare-and-set that never reaches the API server is re-sent a bounded
// number of times, then the run exits 75; the next run settles it.
func TestIntegrationRetireUncertainThenRerun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := suite.StandardKeyring()
	s := e.CreateSecret(suite.KeyringSecret("keyring", before))
	path := e.WriteCommand("retire.json", suite.RetireCommand(s, "k-2026-06", "mut-uncertain"))
	r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s), suite.WithEnv("KEYLEDGER_FAULT=reset:PUT:/secrets/#0"))
	require.Equal(t, 75, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, "uncertain", suite.Outcome(t, r)["outcome"])
	require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion, "nothing reached the API server")
	op, records := e.JournalOf("mut-uncertain")
	require.Equal(t, store.StateResolving, op.State)
	require.Equal(t, 3, suite.Count(records, store.RecordAuthorityCall), "bounded: three sends in one run")

	r = e.Keyledger([]string{"run", path}, e.AsRetirerOf(s))
	require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
	require.Equal(t, "completed", suite.Outcome(t, r)["outcome"])
	after := e.GetSecret(s.Name)
	suite.RequireRetired(t, after, "k-2026-06", "mut-uncertain", before)
	require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, after.ResourceVersion))
	op, records = e.JournalOf("mut-uncertain")
	require.Equal(t, store.StateCompleted, op.State)
	require.Equal(t, 4, suite.Count(records, store.RecordAuthorityCall), "attempt numbers continue across runs")
}
