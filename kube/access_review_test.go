package kube_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/kube/kubefake"
)

// A rules review that carries an evaluationError (an authorizer could not
// resolve a binding: the identity may hold rights the review omits) is
// incomplete, even when it does not say incomplete: the check fails closed.
func TestRulesReviewWithEvaluationErrorIsIncomplete(t *testing.T) {
	t.Parallel()
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a"}, Verbs: []string{"get", "update"}}}
	rules := []authorizationv1.ResourceRule{
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a"}, Verbs: []string{"get", "update"}},
	}
	for name, tc := range map[string]struct {
		evaluationError string
		mismatches      int
	}{
		"complete":         {},
		"evaluation-error": {evaluationError: `role.rbac.authorization.k8s.io "gone" not found`, mismatches: 1},
	} {
		t.Run(name, func(t *testing.T) {
			fake, client := kubefake.NewClientset()
			fake.PrependReactor("create", "selfsubjectrulesreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, &authorizationv1.SelfSubjectRulesReview{Status: authorizationv1.SubjectRulesReviewStatus{
					ResourceRules: rules, EvaluationError: tc.evaluationError}}, nil
			})
			got, err := kube.CheckRules(t.Context(), client, kube.Rights{Namespace: "ns", Rules: want})
			require.NoError(t, err)
			require.Len(t, got, tc.mismatches, "%v", got)
			for _, m := range got {
				require.Contains(t, m, "incomplete")
				require.NotContains(t, m, "gone", "the API server's text is not repeated")
			}
		})
	}
}
