package credentials

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
)

// MaxAttempts bounds how often one call (per step and target) is sent; a
// patch whose resourceVersion test failed (422) is recomputed and sent again
// at most this many times in all.
const MaxAttempts = 5

// Plan builds the engine's plan for one credential plan. cfg is the run's
// client configuration (its request counter and fault injection are kept).
func Plan(cmd *Command, cfg *rest.Config) (workflow.Plan, error) {
	s := cmd.Spec
	client, err := kube.NewCredentials(cfg, kube.CredentialScope{
		Namespace: s.Namespace, Secrets: s.SecretNames(), ExternalSecrets: s.SecretNames(),
		Generators: s.GeneratorNames(), Pods: s.PodNames(), StatefulSets: s.StatefulSetNames(),
	})
	if err != nil {
		return workflow.Plan{}, err
	}
	family := newFamily(cmd, client)
	return workflow.Plan{
		Prepare: store.PrepareParams{
			Kind:          command.KindCredentialPlan,
			MutationID:    cmd.Metadata.MutationID,
			RequestID:     cmd.Metadata.RequestID,
			CommandDigest: cmd.Digest,
			Namespace:     s.Namespace,
			Name:          s.Owner,
			Detail:        cmd.preparation(),
			// Load replaces it with the environment's (RunBoundFromEnv).
			Bound: DefaultRunBound,
		},
		Access:      AccessMatrix(s),
		Rights:      &kube.Rights{Namespace: s.Namespace, Rules: Rules(s)},
		Prefetch:    family.prefetch,
		Family:      family,
		MaxAttempts: MaxAttempts,
		// A plan is desired state: every run is an operation of its own
		// ("<mutationId>:run-<n>"), an interrupted run is resumed.
		Runs: true,
		// A sync with nothing to write (every Secret present and complete,
		// every server accepting) does not need the journal: while it is
		// down, the hook still reads and probes, and exits 0 saying the
		// journal was not consulted (docs/security.md).
		Unjournaled: true,
	}, nil
}

// Rules are exactly the rights a credential plan needs, and the Role that
// render prints: a rule is left out when it would name no resource. This is
// the family's one declaration of its rights; the access matrix and the
// Kubernetes adapter's scope follow from it.
//
//   - Secrets: create (namespace-wide: create cannot be narrowed by name);
//     get and patch on the planned names.
//   - ExternalSecrets: get and delete on every planned Secret's name (an
//     ExternalSecret writes the Secret of its own name: each one is read
//     before any write, and a generator-backed one is adopted whether the
//     plan lists it or not).
//   - Password generators: get and delete on the retired names (the delete
//     carries the UID and resourceVersion of a journaled read).
//   - Pods: get and delete on the server pods.
//   - StatefulSets (apps): get on the servers' expected StatefulSets: a
//     pod is probed only once it is tied to the live one (owner reference
//     group and UID, selector, containers; see family.notOwned).
func Rules(s Spec) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: s.SecretNames(), Verbs: []string{"get", "patch"}},
		{APIGroups: []string{kube.ExternalSecrets.Group}, Resources: []string{kube.ExternalSecrets.Resource},
			ResourceNames: s.SecretNames(), Verbs: []string{"get", "delete"}},
	}
	if names := s.GeneratorNames(); len(names) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{kube.PasswordGenerators.Group}, Resources: []string{kube.PasswordGenerators.Resource},
			ResourceNames: names, Verbs: []string{"get", "delete"}})
	}
	if names := s.PodNames(); len(names) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: names, Verbs: []string{"get", "delete"}})
	}
	if names := s.StatefulSetNames(); len(names) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{kube.StatefulSets.Group}, Resources: []string{kube.StatefulSets.Resource},
			ResourceNames: names, Verbs: []string{"get"}})
	}
	return rules
}

// AccessMatrix is what the identity running the plan must and must not be
// allowed, asked one right at a time beside the rules review against Rules:
// every verb of Rules on every generator, pod and StatefulSet name it lists and on the
// ExternalSecrets the plan adopts and the first planned one (allowed), and
// (denied) list of pods, ExternalSecrets and generators, and get on an
// ExternalSecret outside the plan. Two Secret probes stay as a second,
// independent check: update on a planned Secret and get on one outside the
// plan are denied.
func AccessMatrix(s Spec) []kube.AccessCheck {
	ns := s.Namespace
	var checks []kube.AccessCheck
	// The ExternalSecret rule names every planned Secret: the rules review
	// proves each name; one review per verb and name would cost two
	// requests per Secret, so only the adopted names and the first planned
	// one are asked here, as the independent second check.
	probed := map[string]bool{s.SecretNames()[0]: true}
	for _, n := range s.ExternalSecretNames() {
		probed[n] = true
	}
	for _, r := range Rules(s) {
		if r.Resources[0] == "secrets" {
			continue
		}
		for _, verb := range r.Verbs {
			for _, name := range r.ResourceNames {
				if r.Resources[0] == kube.ExternalSecrets.Resource && !probed[name] {
					continue
				}
				checks = append(checks, kube.AccessCheck{Verb: verb, Group: r.APIGroups[0], Resource: r.Resources[0], Namespace: ns, Name: name, Allowed: true})
			}
		}
	}
	deny := func(verb, group, resource, name string) {
		checks = append(checks, kube.AccessCheck{Verb: verb, Group: group, Resource: resource, Namespace: ns, Name: name})
	}
	secrets := s.SecretNames()
	deny("update", "", "secrets", secrets[0])
	deny("get", "", "secrets", kube.OtherSecretName(secrets...))
	deny("get", kube.ExternalSecrets.Group, kube.ExternalSecrets.Resource, kube.OtherSecretName(secrets...))
	deny("list", "", "pods", "")
	deny("list", kube.ExternalSecrets.Group, kube.ExternalSecrets.Resource, "")
	deny("list", kube.PasswordGenerators.Group, kube.PasswordGenerators.Resource, "")
	return checks
}
