package kube

import (
	"context"
	"fmt"
	"slices"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// AccessCheck is one row of a permission matrix: may this identity do Verb
// on Resource (in Group, optionally one Name) in Namespace? Allowed is the
// answer the workflow requires.
type AccessCheck struct {
	Verb, Group, Resource, Namespace, Name string
	Allowed                                bool
}

func (c AccessCheck) String() string {
	target := c.Resource
	if c.Group != "" {
		target += "." + c.Group
	}
	if c.Name != "" {
		target += "/" + c.Name
	}
	want := "denied"
	if c.Allowed {
		want = "allowed"
	}
	return fmt.Sprintf("%s %s in %s (want %s)", c.Verb, target, c.Namespace, want)
}

// CheckAccess sends one SelfSubjectAccessReview per check, concurrently, and
// returns a description of each check whose answer differs from the one
// required. An error means a review could not be made at all.
func CheckAccess(ctx context.Context, client kubernetes.Interface, checks []AccessCheck) (mismatches []string, err error) {
	type answer struct {
		allowed bool
		err     error
	}
	answers := make([]answer, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			review, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: c.Namespace, Verb: c.Verb, Group: c.Group, Resource: c.Resource, Name: c.Name,
				}},
			}, metav1.CreateOptions{})
			if err != nil {
				answers[i] = answer{err: err}
				return
			}
			answers[i] = answer{allowed: review.Status.Allowed && !review.Status.Denied}
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if a.err != nil {
			return nil, fmt.Errorf("access review %s: %w", checks[i], a.err)
		}
		if a.allowed != checks[i].Allowed {
			got := "denied"
			if a.allowed {
				got = "allowed"
			}
			mismatches = append(mismatches, fmt.Sprintf("%s: %s", checks[i], got))
		}
	}
	return mismatches, nil
}

// SecretRights bounds what an identity may hold on Secrets in Namespace:
// only Verbs, and only on the Secrets named in Names. Access reviews answer
// for one name at a time, so a Role naming one more Secret would pass any
// fixed set of probes; a rules review lists every grant and catches it.
type SecretRights struct {
	Namespace string
	Names     []string
	Verbs     []string
}

// CheckSecretRights asks a SelfSubjectRulesReview for every rule the
// identity holds in the namespace and describes each grant on Secrets
// beyond r. An incomplete review is a mismatch too (fail closed).
func CheckSecretRights(ctx context.Context, client kubernetes.Interface, r SecretRights) (mismatches []string, err error) {
	review, err := client.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: r.Namespace},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("rules review in %s: %w", r.Namespace, err)
	}
	if review.Status.Incomplete {
		return []string{fmt.Sprintf("rules review in %s is incomplete; cannot prove the rights on secrets are exact", r.Namespace)}, nil
	}
	for _, rule := range review.Status.ResourceRules {
		if !slices.ContainsFunc(rule.APIGroups, func(g string) bool { return g == "" || g == "*" }) ||
			!slices.ContainsFunc(rule.Resources, func(res string) bool { return res == "secrets" || res == "*" || res == "*/*" }) {
			continue
		}
		for _, verb := range rule.Verbs {
			if !slices.Contains(r.Verbs, verb) {
				mismatches = append(mismatches, fmt.Sprintf("%s secrets in %s is granted, want only %v", verb, r.Namespace, r.Verbs))
			}
		}
		if len(rule.ResourceNames) == 0 {
			mismatches = append(mismatches, fmt.Sprintf("%v on secrets in %s is granted without resourceNames", rule.Verbs, r.Namespace))
		}
		for _, name := range rule.ResourceNames {
			if !slices.Contains(r.Names, name) {
				mismatches = append(mismatches, fmt.Sprintf("%v on secret %s in %s is granted, want only %v", rule.Verbs, name, r.Namespace, r.Names))
			}
		}
	}
	return mismatches, nil
}
