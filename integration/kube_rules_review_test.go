package integration

import (
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// A RoleBinding to a Role that does not exist makes the real API server's
// rules review carry an evaluationError (without saying incomplete): the
// review cannot show every right the identity holds, so the run exits 77
// before PostgreSQL is contacted.
func TestIntegrationRulesReviewEvaluationErrorIsIncomplete(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.CreateSecret(suite.KeyringSecret("keyring-evaluation-error", suite.StandardKeyring()))
	as := e.AsRetirerOf(s) // ServiceAccount retirer-<name>, exactly the rights
	mutation := "mut-evaluation-error"
	path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, "k-2026-07", mutation))
	_, err := e.Kube.Client().RbacV1().RoleBindings(e.NS).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dangling-binding"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "keyledger-absent-role"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "retirer-" + s.Name, Namespace: e.NS}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	r := e.Keyledger([]string{"run", path}, as)
	require.Equal(t, 77, r.Code, "%s %s", r.Stdout, r.Stderr)
	out := suite.Outcome(t, r)
	require.Equal(t, "permission-mismatch", out["reason"], r.Stdout)
	require.Contains(t, r.Stdout+r.Stderr, "incomplete")
	require.NotContains(t, r.Stdout+r.Stderr, "keyledger-absent-role", "the API server's evaluation text is not repeated")
	st, err := store.Open(t.Context(), e.Journal.OwnerURL)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Load(t.Context(), "", mutation)
	require.ErrorIs(t, err, store.ErrNotFound, "nothing journaled")
	require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion)
}
