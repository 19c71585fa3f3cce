// Package tenant holds what makes a Kubernetes namespace a tenant of the
// one journal: its PostgreSQL role (a CloudNativePG managed role of the
// Cluster keyledger-journal), the role's password in exactly two Secrets
// (keyledger-role-NS in the journal's namespace for CloudNativePG,
// keyledger-journal-credentials in NS for the Jobs), the journal grant, the
// journal CA's certificate as a ConfigMap of NS, and the credentials
// hooks' NetworkPolicy with the API server's endpoints filled in.
//
// Admin.Onboard creates or repairs them, Admin.Rotate gives the role a new
// password, Admin.Offboard removes them. Each is a list of steps run in
// order; each step reports one Change per object (created, unchanged,
// updated, deleted, absent), never a value. The password is generated
// in-process (crypto/rand), written create-once to the two Secrets, and
// never printed, logged or written to a file. docs/tenancy.md says why.
package tenant
