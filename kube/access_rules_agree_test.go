package kube

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// compareRulesByScan is compareRules' resource-rule decision as it was
// made before the exact rights were looked up in a set: every held right
// scanned for among the allowed ones, every wanted one among the held.
func compareRulesByScan(r Rights, status authorizationv1.SubjectRulesReviewStatus) (mismatches []string) {
	allowed := append(grants(r.Rules), grants(AuthenticatedDefaults.Resource)...)
	var held []grant
	seen := map[grant]bool{}
	for _, rule := range status.ResourceRules {
		for _, g := range grants([]rbacv1.PolicyRule{{APIGroups: rule.APIGroups, Resources: rule.Resources, Verbs: rule.Verbs, ResourceNames: rule.ResourceNames}}) {
			held = append(held, g)
			if seen[g] {
				continue
			}
			seen[g] = true
			if !slices.ContainsFunc(allowed, func(a grant) bool { return covers(a, g) }) {
				mismatches = append(mismatches, fmt.Sprintf("%s in %s is granted, beyond the operation's rules", g, r.Namespace))
			}
		}
	}
	for _, want := range grants(r.Rules) {
		if !slices.ContainsFunc(held, func(h grant) bool { return covers(h, want) }) {
			mismatches = append(mismatches, fmt.Sprintf("%s in %s is not granted", want, r.Namespace))
		}
	}
	return mismatches
}

// compareRules makes the same decision, mismatch for mismatch and in the
// same order, as the scan of every right: over random wanted and held
// rules drawn from a small alphabet (so that they overlap), with
// wildcards in every position, rights on every name and on named ones,
// repeats, and reviews that hold less, the same or more.
func TestCompareRulesAgreesWithScan(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(23, 1))
	pick := func(from ...string) []string {
		out := []string{from[rng.IntN(len(from))]}
		if rng.IntN(3) == 0 {
			out = append(out, from[rng.IntN(len(from))])
		}
		return out
	}
	names := func() []string {
		if rng.IntN(3) == 0 {
			return nil // every name
		}
		var out []string
		for range 1 + rng.IntN(4) {
			out = append(out, fmt.Sprintf("s-%d", rng.IntN(6)))
		}
		return out
	}
	rule := func() rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: pick("", "", "external-secrets.io", "*"), Resources: pick("secrets", "secrets", "externalsecrets", "*", "*/*"),
			Verbs: pick("get", "create", "patch", "list", "*"), ResourceNames: names()}
	}
	mismatched := 0
	for i := range 3000 {
		var want []rbacv1.PolicyRule
		for range 1 + rng.IntN(4) {
			want = append(want, rule())
		}
		var held []authorizationv1.ResourceRule
		for _, source := range [][]rbacv1.PolicyRule{want, {rule(), rule()}, AuthenticatedDefaults.Resource} {
			for _, w := range source {
				if rng.IntN(4) > 0 {
					held = append(held, authorizationv1.ResourceRule{APIGroups: w.APIGroups, Resources: w.Resources, Verbs: w.Verbs, ResourceNames: w.ResourceNames})
				}
			}
		}
		rng.Shuffle(len(held), func(a, b int) { held[a], held[b] = held[b], held[a] })
		r := Rights{Namespace: "ns", Rules: want}
		status := authorizationv1.SubjectRulesReviewStatus{ResourceRules: held}
		got := compareRules(r, status)
		require.Equal(t, compareRulesByScan(r, status), got, "case %d: want %v, held %v", i, want, held)
		if len(got) > 0 {
			mismatched++
		}
	}
	require.Greater(t, mismatched, 500, "the cases include many with mismatches")
	require.Less(t, mismatched, 2900, "and many without")
}

// The rights of a plan of 64 Secrets, held exactly: compareRules against
// the scan of every right.
func BenchmarkCompareRules64Secrets(b *testing.B) {
	var secretNames []string
	for i := range 64 {
		secretNames = append(secretNames, fmt.Sprintf("shop-%02d", i))
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: secretNames, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{"external-secrets.io"}, Resources: []string{"externalsecrets"}, ResourceNames: secretNames, Verbs: []string{"get"}},
	}
	var held []authorizationv1.ResourceRule
	for _, w := range append(slices.Clone(want), AuthenticatedDefaults.Resource...) {
		held = append(held, authorizationv1.ResourceRule{APIGroups: w.APIGroups, Resources: w.Resources, Verbs: w.Verbs, ResourceNames: w.ResourceNames})
	}
	r := Rights{Namespace: "shop", Rules: want}
	status := authorizationv1.SubjectRulesReviewStatus{ResourceRules: held}
	for _, c := range []struct {
		name    string
		compare func(Rights, authorizationv1.SubjectRulesReviewStatus) []string
	}{{"set", compareRules}, {"scan", compareRulesByScan}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if m := c.compare(r, status); len(m) != 0 {
					b.Fatal(m)
				}
			}
		})
	}
}
