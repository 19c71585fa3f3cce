package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/credentials"
	"github.com/keyledger/keyledger/workflow/retire"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// widening is one right more than a family's rules.
type widening struct {
	name  string
	group string
	// resource may name a subresource (pods/exec).
	resource, verb string
}

func (w widening) rule() rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{w.group}, Resources: []string{w.resource}, Verbs: []string{w.verb}}
}

// described is how the permission check names the widening.
func (w widening) described() string {
	target := w.resource
	if w.group != "" {
		target += "." + w.group
	}
	return w.verb + " " + target + " (any name)"
}

// escapes are rights that reach every Secret indirectly (through another
// identity, a pod, a token or a new binding): each must be refused whatever
// else the identity holds exactly.
var escapes = []widening{
	{"impersonate-serviceaccounts", "", "serviceaccounts", "impersonate"},
	{"impersonate-users", "", "users", "impersonate"},
	{"create-pods", "", "pods", "create"},
	{"create-pods-exec", "", "pods/exec", "create"},
	{"create-serviceaccount-token", "", "serviceaccounts/token", "create"},
	{"bind-roles", "rbac.authorization.k8s.io", "roles", "bind"},
	{"escalate-roles", "rbac.authorization.k8s.io", "roles", "escalate"},
	{"create-rolebindings", "rbac.authorization.k8s.io", "rolebindings", "create"},
}

// credentialWidenings are namespace-wide forms of rights a credential plan
// holds only by name.
var credentialWidenings = []widening{
	{"get-pods", "", "pods", "get"},
	{"delete-pods", "", "pods", "delete"},
	{"get-externalsecrets", kube.ExternalSecrets.Group, kube.ExternalSecrets.Resource, "get"},
	{"delete-externalsecrets", kube.ExternalSecrets.Group, kube.ExternalSecrets.Resource, "delete"},
	{"get-passwords", kube.PasswordGenerators.Group, kube.PasswordGenerators.Resource, "get"},
	{"delete-passwords", kube.PasswordGenerators.Group, kube.PasswordGenerators.Resource, "delete"},
}

// widenedIdentity is a ServiceAccount holding exactly rules through a Role,
// plus w: in the same Role, or (cluster) through a ClusterRole bound by a
// ClusterRoleBinding. It returns the kubeconfig path once the API server's
// authorizer grants w to it.
func widenedIdentity(e *env, name string, rules []rbacv1.PolicyRule, w widening, cluster bool) string {
	e.T.Helper()
	ctx, c := e.T.Context(), e.Kube.Client()
	if !cluster {
		rules = append(append([]rbacv1.PolicyRule(nil), rules...), w.rule())
	} else {
		global := e.NS + "-" + name
		_, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: global},
			Rules: []rbacv1.PolicyRule{w.rule()}}, metav1.CreateOptions{})
		require.NoError(e.T, err)
		_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: global},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: global},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: e.NS}},
		}, metav1.CreateOptions{})
		require.NoError(e.T, err)
		e.T.Cleanup(func() {
			ctx := context.Background()
			_ = c.RbacV1().ClusterRoleBindings().Delete(ctx, global, metav1.DeleteOptions{})
			_ = c.RbacV1().ClusterRoles().Delete(ctx, global, metav1.DeleteOptions{})
		})
	}
	path := e.ServiceAccountKubeconfig(name, rules)
	// Wait until the authorizer grants the widening, so that a pass can
	// never be the authorizer lagging.
	waitGranted(e, name, w.rule())
	return path
}

// waitGranted returns once the API server's authorizer (which reads
// bindings from its informers) grants rule's first right to the
// ServiceAccount name.
func waitGranted(e *env, name string, rule rbacv1.PolicyRule) {
	e.T.Helper()
	resource, sub, _ := strings.Cut(rule.Resources[0], "/")
	attrs := &authorizationv1.ResourceAttributes{Namespace: e.NS, Verb: rule.Verbs[0], Group: rule.APIGroups[0], Resource: resource, Subresource: sub}
	if len(rule.ResourceNames) > 0 {
		attrs.Name = rule.ResourceNames[0]
	}
	for {
		sar, err := e.Kube.Client().AuthorizationV1().SubjectAccessReviews().Create(e.T.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               "system:serviceaccount:" + e.NS + ":" + name,
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + e.NS, "system:authenticated"},
				ResourceAttributes: attrs,
			}}, metav1.CreateOptions{})
		require.NoError(e.T, err)
		if sar.Status.Allowed {
			return
		}
	}
}

// rightsCase is one family's command and exact rules.
type rightsCase struct {
	family string
	// prepare creates what the command acts on and returns the command and
	// the family's exact rules for it.
	prepare    func(t *testing.T, e *env, tag string) (cmd map[string]any, rules []rbacv1.PolicyRule)
	widenings  []widening
	exactFully bool // the exact identity's run completes (else: it gets past the check)
}

// Every family refuses (77, before PostgreSQL is contacted) an identity
// that holds its exact rules and one right more, in the same Role or
// through a ClusterRoleBinding; the exact identities pass. The rules are
// the families' own declarations (retire.Rules, versioned.Rules,
// credentials.Rules), the same that make the deploy and rendered Roles.
func TestIntegrationRightsAreExact(t *testing.T) {
	t.Parallel()
	e := setup(t)
	families := []rightsCase{
		{family: "retire", widenings: escapes, exactFully: true,
			prepare: func(t *testing.T, e *env, tag string) (map[string]any, []rbacv1.PolicyRule) {
				s := e.CreateSecret(suite.KeyringSecret("rights-"+tag, suite.StandardKeyring()))
				return suite.RetireCommand(s, "k-2026-07", "mut-rights-"+tag), retire.Rules(s.Name)
			}},
		{family: "versioned", widenings: escapes, exactFully: true,
			prepare: func(t *testing.T, e *env, tag string) (map[string]any, []rbacv1.PolicyRule) {
				name := "rights-" + tag
				s := e.CreateSecret(suite.PlainSecret(name, map[string][]byte{"k": suite.VCanary("r")}))
				return suite.UpdateCommand(e.NS, name, s.ResourceVersion, "mut-rights-"+tag, map[string][]byte{"k": suite.VCanary("s")}), versioned.Rules(name)
			}},
		{family: "credentials", widenings: append(append([]widening(nil), escapes...), credentialWidenings...),
			prepare: func(t *testing.T, e *env, tag string) (map[string]any, []rbacv1.PolicyRule) {
				plan := suite.CredentialPlan(e.NS, "mut-rights-"+tag, []suite.PlanSecret{suite.StandardSecret("rights-" + tag + "-app")}, func(spec map[string]any) {
					spec["adopt"] = []any{map[string]any{"externalSecret": "rights-" + tag + "-app", "generators": []any{"rights-" + tag + "-password"}}}
					spec["servers"] = []any{map[string]any{"protocol": "valkey", "pod": "rights-" + tag + "-0", "port": 6379,
						"secret": "rights-" + tag + "-app", "passwordKey": "password"}}
				})
				return plan, credentials.Rules(suite.SpecOf(t, plan))
			}},
	}
	for _, f := range families {
		t.Run(f.family, func(t *testing.T) {
			t.Run("exact", func(t *testing.T) {
				cmd, rules := f.prepare(t, e, f.family+"-exact")
				kubeconfig := e.ServiceAccountKubeconfig(f.family+"-exact", rules)
				for _, rule := range rules {
					waitGranted(e, f.family+"-exact", rule)
				}
				r := e.RunCmd(cmd, suite.AsKubeconfig(kubeconfig))
				require.NotEqual(t, 77, r.Code, "the exact rules pass the check: %s %s", r.Stdout, r.Stderr)
				if f.exactFully {
					require.Equal(t, 0, r.Code, "%s %s", r.Stdout, r.Stderr)
				}
				mutation := cmd["metadata"].(map[string]any)["mutationId"].(string)
				if f.family == "credentials" {
					mutation = store.RunID(mutation, 1) // each run of a plan is an operation of its own
				}
				op, _ := e.JournalOf(mutation)
				require.NotNil(t, op, "the run reached the journal")
			})
			for _, w := range f.widenings {
				for _, cluster := range []bool{false, true} {
					name := w.name
					if cluster {
						name += "-cluster"
					}
					t.Run(name, func(t *testing.T) {
						tag := f.family + "-" + name
						cmd, rules := f.prepare(t, e, tag)
						kubeconfig := widenedIdentity(e, tag, rules, w, cluster)
						url, connections := suite.PGListener(t)
						r := e.RunCmd(cmd, suite.AsKubeconfig(kubeconfig), suite.WithDatabase(url))
						require.Equal(t, 77, r.Code, "%s %s", r.Stdout, r.Stderr)
						out := suite.Outcome(t, r)
						require.Equal(t, "permission-mismatch", out["reason"])
						require.Contains(t, out["error"], fmt.Sprintf("%s in %s is granted", w.described(), e.NS), "the widening itself is what was found")
						require.Zero(t, connections.Load(), "PostgreSQL is never contacted")
					})
				}
			}
		})
	}
}
