package kube

import (
	"context"
	"fmt"
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
