package tenant

import (
	"errors"
	"fmt"

	"github.com/keyledger/keyledger/cause"
	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
)

// Reasons of the failures of onboard, rotate and offboard (each a
// store.PreconditionError: exit 64, 69 when Unavailable, 77 when
// Permission). docs/reference.md lists them.
const (
	// ReasonNamespaceIsJournal: the journal's own namespace serves no Jobs (64).
	ReasonNamespaceIsJournal = "namespace-is-journal"
	// ReasonNamespaceMissing: the served namespace does not exist (64).
	ReasonNamespaceMissing = "namespace-missing"
	// ReasonJournalClusterMissing: no Cluster keyledger-journal in
	// keyledger-journal, or no CloudNativePG on the cluster (64).
	ReasonJournalClusterMissing = "journal-cluster-missing"
	// ReasonJournalCAMissing: CloudNativePG has not (yet) written the CA
	// Secret keyledger-journal-ca with a ca.crt (69).
	ReasonJournalCAMissing = "journal-ca-missing"
	// ReasonAPIEndpointMissing: the kubernetes EndpointSlice of default
	// lists no ready address and port (69).
	ReasonAPIEndpointMissing = "api-endpoint-missing"
	// ReasonRoleNotReconciled: CloudNativePG did not report the role (or
	// its new password, or its removal) applied within --wait (69).
	ReasonRoleNotReconciled = "role-not-reconciled"
	// ReasonRoleCannotReconcile: CloudNativePG reports that it cannot
	// reconcile the role (69).
	ReasonRoleCannotReconcile = "role-cannot-reconcile"
	// ReasonNotOnboarded: rotate of a namespace whose role Secrets do not
	// exist (64).
	ReasonNotOnboarded = "not-onboarded"
	// ReasonObjectNotKeyledgers: an object of the name onboarding writes
	// exists and is not of the kind it writes (a Secret of another type) (64).
	ReasonObjectNotKeyledgers = "object-not-keyledgers"
	// ReasonObjectChanged: an object (the Cluster, a Secret) changed
	// under every attempt to write it (69).
	ReasonObjectChanged = "object-changed"
	// ReasonKubernetesRejected: the API server refused a write for a
	// reason of its own (a validation, an admission webhook) (69).
	ReasonKubernetesRejected = "kubernetes-rejected"
)

// Reasons lists every reason of this package.
func Reasons() []string {
	return []string{ReasonNamespaceIsJournal, ReasonNamespaceMissing, ReasonJournalClusterMissing, ReasonJournalCAMissing,
		ReasonAPIEndpointMissing, ReasonRoleNotReconciled, ReasonRoleCannotReconcile, ReasonNotOnboarded,
		ReasonObjectNotKeyledgers, ReasonObjectChanged, ReasonKubernetesRejected}
}

func refuse(reason, fix, format string, args ...any) error {
	return &store.PreconditionError{Reason: reason, Msg: fmt.Sprintf(format, args...), Fix: fix}
}

func unavailable(reason, fix, format string, args ...any) error {
	return &store.PreconditionError{Reason: reason, Msg: fmt.Sprintf(format, args...), Fix: fix, Unavailable: true}
}

// apiError wraps a failed API call with what was being done: a failure
// package cause names (unreachable, 401, 403, 429, 5xx) keeps its reason
// and exit code; any other refusal is kubernetes-rejected (69). The
// message is kube.Error's: no address, no path.
func apiError(what string, err error) error {
	wrapped := kube.Wrap(err)
	if _, ok := cause.Of(wrapped); ok {
		return fmt.Errorf("%s: %w", what, wrapped)
	}
	return unavailable(ReasonKubernetesRejected,
		"read the API server's answer above (a validation or admission policy refused the write), correct it, then run the same command again",
		"%s: %v", what, wrapped)
}

// notFound says whether err is the API server's 404.
func notFound(err error) bool { return errors.Is(kube.Wrap(err), kube.ReasonNotFound) }

// conflict says whether err is the API server's 409 or a failed JSON
// patch test.
func conflict(err error) bool {
	w := kube.WrapPatch(err)
	return errors.Is(w, kube.ReasonConflict) || errors.Is(w, kube.ReasonTestFailed) || errors.Is(w, kube.ReasonAlreadyExists)
}
