package tenant

import (
	"fmt"
	"strings"

	"github.com/keyledger/keyledger/store"
)

// The journal as deploy/journal names it.
const (
	// JournalNamespace is the journal's namespace.
	JournalNamespace = "keyledger-journal"
	// JournalCluster is the CloudNativePG Cluster of the journal.
	JournalCluster = "keyledger-journal"
	// CASecret is CloudNativePG's CA Secret (certificate and private key).
	CASecret = "keyledger-journal-ca" //nolint:gosec // G101: a Secret's name, not a credential
	// CAConfigMap is the CA's certificate in a served namespace.
	CAConfigMap = "keyledger-journal-ca"
	// CredentialsSecret is the role's login in a served namespace, read by
	// the Jobs (components/cloudnativepg).
	CredentialsSecret = "keyledger-journal-credentials" //nolint:gosec // G101: a Secret's name, not a credential
	// FencePolicy is the NetworkPolicy of a namespace's credentials hooks
	// (deploy/credentials).
	FencePolicy = "keyledger-credentials"
	// RoleSecretPrefix + NS is the role's password Secret CloudNativePG
	// reads, in the journal's namespace.
	RoleSecretPrefix = "keyledger-role-" //nolint:gosec // G101: a Secret name's prefix, not a credential
	// RolePrefix + NS (every "-" turned into "_") is the namespace's role.
	RolePrefix = "keyledger_"
)

// Names are the names of one tenant's objects.
type Names struct {
	Namespace  string // the served namespace
	Role       string // its PostgreSQL role
	RoleSecret string // the role's password Secret in JournalNamespace
}

// For names the objects of namespace ns, refusing a namespace that is not
// a DNS-1123 label, whose role name would not fit PostgreSQL's 63 bytes,
// or that is the journal's own.
func For(ns string) (Names, error) {
	if _, err := store.CheckGrantArgs("keyledger", []string{ns}); err != nil {
		return Names{}, err
	}
	role := RolePrefix + strings.ReplaceAll(ns, "-", "_")
	if len(role) > 63 {
		return Names{}, &store.PreconditionError{Reason: store.ReasonInvalidNamespace,
			Msg: fmt.Sprintf("namespace %q is too long to onboard: its role name would have %d characters, PostgreSQL's limit is 63", ns, len(role)),
			Fix: "onboard a namespace of at most 53 characters, or declare its role and grant it by hand (deploy/README.md, appendix)"}
	}
	if ns == JournalNamespace {
		return Names{}, &store.PreconditionError{Reason: ReasonNamespaceIsJournal,
			Msg: fmt.Sprintf("namespace %q is the journal's own: it holds the schema owner's Secrets and serves no Jobs", ns),
			Fix: "onboard the namespace whose Secrets keyledger writes"}
	}
	return Names{Namespace: ns, Role: role, RoleSecret: RoleSecretPrefix + ns}, nil
}
