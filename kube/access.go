package kube

import (
	"context"
	"fmt"
	"net/http/httptrace"
	"slices"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
func CheckAccess(ctx context.Context, client Interface, checks []AccessCheck) (mismatches []string, err error) {
	return CheckAccessAndRules(ctx, client, checks, nil)
}

// CheckAccessAndRules is CheckAccess and then, when r is set, CheckRules:
// the same mismatches in the same order (the matrix's, then the rules
// review's) and the same error (the first review in the matrix's order
// that could not be made, else the rules review's), from one fan-out on
// one connection. The first review is sent alone: it opens the connection
// (HTTP/2, as client-go negotiates with the API server), which every other
// review then shares at once; sent all at once on a new client, each would
// dial and handshake a TLS connection of its own. The others leave as soon
// as the first has its connection (httptrace's GotConn: the handshake is
// done, the connection pooled), not when its answer is back; when no
// connection is reported they leave once it returns. When that first
// review cannot be made, nothing more is sent.
func CheckAccessAndRules(ctx context.Context, client Interface, checks []AccessCheck, r *Rights) (mismatches []string, err error) {
	answers := make([]accessAnswer, len(checks))
	var rules []string
	var rulesErr error
	reviewRules := func() {
		if r != nil {
			rules, rulesErr = CheckRules(ctx, client, *r)
		}
	}
	var jobs []func()
	for i, c := range checks {
		jobs = append(jobs, func() { answers[i] = review(ctx, client, c) })
	}
	jobs = append(jobs, reviewRules)
	if len(jobs) == 1 {
		jobs[0]()
	} else {
		connected := make(chan struct{})
		var once sync.Once
		first := make(chan struct{})
		firstCtx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { once.Do(func() { close(connected) }) },
		})
		go func() {
			defer close(first)
			answers[0] = review(firstCtx, client, checks[0])
		}()
		select {
		case <-connected:
		case <-first:
		}
		rest := true
		select {
		case <-first:
			rest = answers[0].err == nil // failed: nothing more is sent
		default:
		}
		var wg sync.WaitGroup
		for _, job := range jobs[1:] {
			if !rest {
				break
			}
			wg.Add(1)
			go func() { defer wg.Done(); job() }()
		}
		wg.Wait()
		<-first
	}
	if mismatches, err = accessMismatches(checks, answers); err != nil {
		return nil, err
	}
	if rulesErr != nil {
		return nil, rulesErr
	}
	return append(mismatches, rules...), nil
}

type accessAnswer struct {
	allowed bool
	err     error
}

// review sends the SelfSubjectAccessReview of c.
func review(ctx context.Context, client Interface, c AccessCheck) accessAnswer {
	review, err := client.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: c.Namespace, Verb: c.Verb, Group: c.Group, Resource: c.Resource, Name: c.Name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return accessAnswer{err: wrap(err)}
	}
	return accessAnswer{allowed: review.Status.Allowed && !review.Status.Denied}
}

// accessMismatches describes each answer that differs from its check's.
func accessMismatches(checks []AccessCheck, answers []accessAnswer) (mismatches []string, err error) {
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

// reviewIncomplete reports whether a rules review could not list every rule:
// the API server says so (incomplete), or an authorizer failed to evaluate
// a rule (evaluationError; a binding to a missing role, say). Either way
// the identity may hold rights the review does not show, so the check fails
// closed. The error's text is the API server's and is never repeated.
func reviewIncomplete(status authorizationv1.SubjectRulesReviewStatus) bool {
	return status.Incomplete || status.EvaluationError != ""
}

// SecretCheck is one access check on Secrets (name may be empty: the
// collection).
func SecretCheck(verb, namespace, name string, allowed bool) AccessCheck {
	return AccessCheck{Verb: verb, Resource: "secrets", Namespace: namespace, Name: name, Allowed: allowed}
}

// OtherSecretName is a Secret name that is none of names: a probe that an
// identity's access stops at the Secrets it is meant to have.
func OtherSecretName(names ...string) string {
	for i := 0; ; i++ {
		name := "keyledger-matrix-probe"
		if i > 0 {
			name = fmt.Sprintf("%s-%d", name, i)
		}
		if !slices.Contains(names, name) {
			return name
		}
	}
}

// Rights are an identity's complete rule set in one namespace: the rules a
// family declares once (its Rules function), from which its deploy Role,
// its rendered Role and its test identities are made.
type Rights struct {
	Namespace string
	Rules     []rbacv1.PolicyRule
}

// AuthenticatedDefaults are the rules every authenticated user (and every
// ServiceAccount) holds in a cluster with the default RBAC bootstrap
// policy, and that a rules review therefore always lists: the self-reviews
// of system:basic-user, the discovery and public-info non-resource URLs of
// system:discovery and system:public-info-viewer, and the ServiceAccount
// issuer discovery URLs of system:service-account-issuer-discovery (bound
// to every ServiceAccount). CheckRules accepts them beside a family's
// rules, and nothing else.
var AuthenticatedDefaults = struct {
	Resource    []rbacv1.PolicyRule
	NonResource []rbacv1.PolicyRule
}{
	Resource: []rbacv1.PolicyRule{
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}, Verbs: []string{"create"}},
	},
	NonResource: []rbacv1.PolicyRule{{
		NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"},
		Verbs:           []string{"get"},
	}, {
		NonResourceURLs: []string{"/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/"},
		Verbs:           []string{"get"},
	}},
}

// grant is one right: verb on resource (of group), on one name or, when
// name is empty, on every name.
type grant struct{ group, resource, verb, name string }

func (g grant) String() string {
	target := g.resource
	if g.group != "" {
		target += "." + g.group
	}
	if g.name != "" {
		return fmt.Sprintf("%s %s/%s", g.verb, target, g.name)
	}
	return fmt.Sprintf("%s %s (any name)", g.verb, target)
}

// grants expands rules into single rights ("*" stays a literal word, so a
// wildcard in a review is only ever covered by a wildcard in the wanted
// rules, which no family declares).
func grants(rules []rbacv1.PolicyRule) []grant {
	var out []grant
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out = append(out, grant{g, res, v, n})
					}
				}
			}
		}
	}
	return out
}

// covers reports whether a right held as have includes want: same group,
// resource and verb (or a wildcard held), and have is on every name or on
// want's name.
func covers(have, want grant) bool {
	match := func(h, w string) bool { return h == w || h == "*" }
	resource := match(have.resource, want.resource) || have.resource == "*/*"
	return match(have.group, want.group) && resource && match(have.verb, want.verb) &&
		(have.name == "" || have.name == want.name)
}

func setOf(gs []grant) map[grant]bool {
	set := make(map[grant]bool, len(gs))
	for _, g := range gs {
		set[g] = true
	}
	return set
}

// CheckRules asks one SelfSubjectRulesReview for every rule the identity
// holds in r.Namespace (Role and ClusterRole grants alike) and describes
// each right beyond r.Rules and AuthenticatedDefaults, and each right in
// r.Rules that is missing. An incomplete review is a mismatch (fail closed):
// the identity may hold rights it cannot be shown.
func CheckRules(ctx context.Context, client Interface, r Rights) (mismatches []string, err error) {
	review, err := client.SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: r.Namespace},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("rules review in %s: %w", r.Namespace, wrap(err))
	}
	return compareRules(r, review.Status), nil
}

// compareRules is CheckRules' decision on one review's answer.
func compareRules(r Rights, status authorizationv1.SubjectRulesReviewStatus) (mismatches []string) {
	if reviewIncomplete(status) {
		mismatches = append(mismatches, fmt.Sprintf("rules review in %s is incomplete; cannot prove the rights are exact", r.Namespace))
	}
	allowed := append(grants(r.Rules), grants(AuthenticatedDefaults.Resource)...)
	// Every right covers itself, so a right found among the others as it
	// is needs no scan: a plan of 64 Secrets holds and wants a few hundred
	// named rights, each scanned for among all the others before.
	allowedSet := setOf(allowed)
	var held []grant
	seen := map[grant]bool{}
	for _, rule := range status.ResourceRules {
		for _, g := range grants([]rbacv1.PolicyRule{{APIGroups: rule.APIGroups, Resources: rule.Resources, Verbs: rule.Verbs, ResourceNames: rule.ResourceNames}}) {
			held = append(held, g)
			if seen[g] {
				continue
			}
			seen[g] = true
			// A held right is fine only if a wanted right is at least as
			// wide: exactly the same, or (for a named one) the same on
			// every name.
			if !allowedSet[g] && !slices.ContainsFunc(allowed, func(a grant) bool { return covers(a, g) }) {
				mismatches = append(mismatches, fmt.Sprintf("%s in %s is granted, beyond the operation's rules", g, r.Namespace))
			}
		}
	}
	for _, want := range grants(r.Rules) {
		if !seen[want] && !slices.ContainsFunc(held, func(h grant) bool { return covers(h, want) }) {
			mismatches = append(mismatches, fmt.Sprintf("%s in %s is not granted", want, r.Namespace))
		}
	}
	defaults := map[string]bool{}
	for _, rule := range AuthenticatedDefaults.NonResource {
		for _, u := range rule.NonResourceURLs {
			for _, v := range rule.Verbs {
				defaults[v+" "+u] = true
			}
		}
	}
	for _, rule := range status.NonResourceRules {
		for _, u := range rule.NonResourceURLs {
			for _, v := range rule.Verbs {
				if !defaults[v+" "+u] {
					mismatches = append(mismatches, fmt.Sprintf("%s on non-resource URL %s is granted, beyond what every authenticated user holds", v, u))
				}
			}
		}
	}
	return mismatches
}
