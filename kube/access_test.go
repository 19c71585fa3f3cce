package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestCompareRules(t *testing.T) {
	t.Parallel()
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a", "b"}, Verbs: []string{"get", "patch"}},
	}
	review := func(extra ...authorizationv1.ResourceRule) []authorizationv1.ResourceRule {
		return append([]authorizationv1.ResourceRule{
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a", "b"}, Verbs: []string{"patch", "get"}},
		}, extra...)
	}
	discovery := []authorizationv1.NonResourceRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/api", "/apis/*", "/version"}}}
	cases := []struct {
		name        string
		status      authorizationv1.SubjectRulesReviewStatus
		mismatch    string
		mismatchNum int
	}{
		{name: "exact", status: authorizationv1.SubjectRulesReviewStatus{ResourceRules: review(), NonResourceRules: discovery}},
		{name: "exact-split-differently", status: authorizationv1.SubjectRulesReviewStatus{ResourceRules: append(review()[:3],
			authorizationv1.ResourceRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a"}, Verbs: []string{"get", "patch"}},
			authorizationv1.ResourceRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"b"}, Verbs: []string{"get", "patch"}})}},
		{name: "incomplete", status: authorizationv1.SubjectRulesReviewStatus{ResourceRules: review(), Incomplete: true}, mismatch: "incomplete", mismatchNum: 1},
		{name: "another-name", mismatch: "get secrets/c", mismatchNum: 1, status: authorizationv1.SubjectRulesReviewStatus{ResourceRules: review(
			authorizationv1.ResourceRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"c"}, Verbs: []string{"get"}})}},
		{name: "namespace-wide-get", mismatch: "get secrets (any name)", mismatchNum: 1, status: authorizationv1.SubjectRulesReviewStatus{ResourceRules: review(
			authorizationv1.ResourceRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})}},
		{name: "impersonate", mismatch: "impersonate serviceaccounts (any name)", mismatchNum: 1, status: authorizationv1.SubjectRulesReviewStatus{ResourceRules: review(
			authorizationv1.ResourceRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}})}},
		{name: "pods-exec", mismatch: "create pods/exec", mismatchNum: 1, status: authorizationv1.SubjectRulesReviewStatus{ResourceRules: review(
			authorizationv1.ResourceRule{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}})}},
		{name: "wildcard", mismatch: "* *.* (any name)", mismatchNum: 1, status: authorizationv1.SubjectRulesReviewStatus{ResourceRules: review(
			authorizationv1.ResourceRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}})}},
		{name: "non-resource", mismatch: "non-resource URL /metrics", mismatchNum: 1, status: authorizationv1.SubjectRulesReviewStatus{ResourceRules: review(),
			NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}}}},
		{name: "missing", mismatch: "patch secrets/b in ns is not granted", mismatchNum: 1, status: authorizationv1.SubjectRulesReviewStatus{ResourceRules: append(review()[:3],
			authorizationv1.ResourceRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a", "b"}, Verbs: []string{"get"}},
			authorizationv1.ResourceRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a"}, Verbs: []string{"patch"}})}},
	}
	for _, tc := range cases {
		got := compareRules(Rights{Namespace: "ns", Rules: want}, tc.status)
		require.Len(t, got, tc.mismatchNum, "%s: %v", tc.name, got)
		if tc.mismatch != "" {
			require.Contains(t, got[0], tc.mismatch, tc.name)
		}
	}
}
