package retire

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// Rules are exactly the rights a retirement of the keyring Secret
// secretName needs, and all of them: get and update on that one Secret.
// They are written here once: the permission check proves the identity
// holds exactly these (kube.CheckRules), deploy/base/role.yaml is checked
// against them, and the tests' identities are made from them.
func Rules(secretName string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secretName}, Verbs: []string{"get", "update"}},
	}
}
