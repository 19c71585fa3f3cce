package integration

import (
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/keyledger/keyledger/integration/suite"
)

// nodeTenant is what one served namespace's part of the tenancy run leaves:
// the namespace, its journal role's URL and the operations it journaled.
type nodeTenant struct {
	ns        string
	roleURL   string
	mutations []string
}

// journaledOperation is an operation as PostgreSQL holds it.
type journaledOperation struct {
	MutationID, Namespace, State string
}

// operationsAs lists the operations the role of url sees, straight from
// the table (no keyledger code between the test and PostgreSQL).
func operationsAs(t *testing.T, url string) []journaledOperation {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), "SELECT mutation_id, target_namespace, state::text FROM keyledger.operations ORDER BY id")
	require.NoError(t, err)
	ops, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (journaledOperation, error) {
		var o journaledOperation
		return o, r.Scan(&o.MutationID, &o.Namespace, &o.State)
	})
	require.NoError(t, err)
	return ops
}

// recordsOfAs counts, as the role of url, the records of the operations
// with the given mutation ids.
func recordsOfAs(t *testing.T, url string, mutations []string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(t.Context())
	var n int
	require.NoError(t, conn.QueryRow(t.Context(),
		`SELECT count(*) FROM keyledger.records r WHERE r.operation_id IN
		   (SELECT id FROM keyledger.operations WHERE mutation_id = ANY($1))`, mutations).Scan(&n))
	return n
}

// The rendered deploy on the real node, one journal for three namespaces:
// a retirement Job (deploy/overlays/cloudnativepg), a versioned-write Job
// (deploy/overlays/cloudnativepg-versioned) and the credentials hook
// (`keyledger render credentials`, fenced by deploy/credentials), each in
// its own namespace with its own journal role, each reaching the journal in
// keyledger-journal across namespaces (NetworkPolicy egress by namespace
// and pod selector, the -rw Service name, verify-full against the CA's
// certificate). The three run side by side and each completes. Then, as
// PostgreSQL holds it: as the owner, every operation is journaled under its
// own namespace, completed; as each namespace's role, exactly its own
// operations are visible and the others' operations and records are not.
// On the node's control plane, no keyledger ServiceAccount may read a
// Secret of the journal's namespace.
func TestIntegrationNodeTenancy(t *testing.T) {
	ne := setupNode(t)
	ne.StartJournal()
	var mu sync.Mutex
	var tenants []nodeTenant
	ran := func(run func(*testing.T) nodeTenant) func(*testing.T) {
		return func(t *testing.T) {
			t.Parallel()
			te := run(t)
			// On the node's control plane, while the namespace is there: no
			// keyledger ServiceAccount of it may read a Secret of the
			// journal's namespace.
			suite.RequireNoJournalSecretAccess(t.Context(), t, ne.Kube.Client(), keyledgerServiceAccountsIn(t, ne, te.ns))
			mu.Lock()
			defer mu.Unlock()
			tenants = append(tenants, te)
		}
	}
	t.Run("jobs", func(t *testing.T) {
		t.Run("retirement", ran(nodeRetirementJob))
		t.Run("versioned", ran(nodeVersionedJob))
		t.Run("credentials-hook", ran(nodeCredentialsHook))
	})
	if t.Failed() {
		return
	}
	require.Len(t, tenants, 3)

	owner := operationsAs(t, suite.NodeJournalOwnerURL())
	byMutation := map[string]journaledOperation{}
	for _, o := range owner {
		byMutation[o.MutationID] = o
	}
	for _, te := range tenants {
		for _, m := range te.mutations {
			require.Contains(t, byMutation, m, "the owner sees %s", m)
			require.Equal(t, te.ns, byMutation[m].Namespace, "%s is journaled under its namespace", m)
			require.Equal(t, "completed", byMutation[m].State, m)
		}
	}
	for _, te := range tenants {
		seen := operationsAs(t, te.roleURL)
		var mine []string
		for _, o := range seen {
			require.Equal(t, te.ns, o.Namespace, "the role of %s sees only its namespace's operations: %v", te.ns, o)
			mine = append(mine, o.MutationID)
		}
		var others []string
		for _, other := range tenants {
			if other.ns != te.ns {
				others = append(others, other.mutations...)
			}
		}
		for _, m := range te.mutations {
			require.True(t, slices.Contains(mine, m), "the role of %s sees its own %s: %v", te.ns, m, mine)
		}
		require.Positive(t, recordsOfAs(t, suite.NodeJournalOwnerURL(), others), "the others' operations have records")
		require.Zero(t, recordsOfAs(t, te.roleURL, others), "the role of %s sees no record of %v", te.ns, others)
	}

	// The schema owner's ServiceAccount too (each namespace's were
	// reviewed before its namespace went).
	suite.RequireNoJournalSecretAccess(t.Context(), t, ne.Kube.Client(), keyledgerServiceAccountsIn(t, ne, suite.JournalNamespace))
}

// keyledgerServiceAccountsIn lists ns's keyledger ServiceAccounts (the
// deploy/ Jobs', the hook's, the schema owner's) as objects; there is at
// least one.
func keyledgerServiceAccountsIn(t *testing.T, ne *nodeEnv, ns string) []*unstructured.Unstructured {
	t.Helper()
	sas, err := ne.Kube.Client().CoreV1().ServiceAccounts(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var objs []*unstructured.Unstructured
	for _, sa := range sas.Items {
		if sa.Labels["app.kubernetes.io/part-of"] == "keyledger" || sa.Labels["app.kubernetes.io/managed-by"] == "keyledger" {
			objs = append(objs, &unstructured.Unstructured{Object: map[string]any{"kind": "ServiceAccount",
				"metadata": map[string]any{"name": sa.Name, "namespace": sa.Namespace}}})
		}
	}
	require.NotEmpty(t, objs, "keyledger ServiceAccounts in %s", ns)
	return objs
}
