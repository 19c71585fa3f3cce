package versioned

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// Rules are exactly the rights versioned writes to the live Secret name
// need, and all of them. Snapshot names derive from the live UID and
// version, so get, create and delete cannot be narrowed by resourceNames,
// and list never can: get, list, create and delete on Secrets in the
// namespace; update stays bound to the live name (snapshots are never
// updated). They are written here once: the permission check proves the
// identity holds exactly these (kube.CheckRules) and the tests' identities
// are made from them.
func Rules(name string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{name}, Verbs: []string{"update"}},
	}
}
