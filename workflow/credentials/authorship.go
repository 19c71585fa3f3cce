package credentials

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// Authorship is what the journal proves about where a planned Secret came
// from. Every run journals it for every planned Secret (the create's
// applied answer, or the resolution of its 409) and for every server it
// restarts (the delete-pod call names the Secret and its authorship), and
// the outcome prints it.
type Authorship string

const (
	// AuthorshipProven: a run of this plan created it. It carries the nonce
	// of a create-secret call some run of the plan journaled (only the
	// nonce's digest is journaled, before the create is sent), is Opaque and
	// holds exactly the planned keys.
	AuthorshipProven Authorship = "proven"
	// AuthorshipAdopted: it was produced by a generator-backed
	// ExternalSecret that a run of this plan found and orphaned, and the
	// journal holds its UID as adopted (UIDs are the API server's: nobody
	// can give a planted Secret the UID of an adopted one).
	AuthorshipAdopted Authorship = "adopted"
	// AuthorshipUnproven: kept as it was found. Anyone who may create
	// Secrets in the namespace may have written it, with a password they
	// know; keyledger keeps it (create-if-absent never replaces a value) and
	// says so.
	AuthorshipUnproven Authorship = "unproven"
)

// BindJournal implements workflow.JournalBound: authorship is proven from
// the records of every run of the plan.
func (f *family) BindJournal(j workflow.JournalReader) { f.journal = j }

// authorship says where s, found in place by this run, came from, and
// which run proved it. It reads the journal: the nonce s carries against
// every create call of every run of the plan (with the planned type and
// keys), then this run's adoption (its ExternalSecret found and orphaned),
// then the newest record of an earlier
// run naming s's UID as adopted (or proven). Without a journal to read (it
// is always bound in a run) nothing is proven. fx asks the journal (and
// answers a question asked before in the same decision).
func (f *family) authorship(ctx context.Context, p *progress, s *corev1.Secret, fx *runFinds) (Authorship, string, error) {
	target := f.target(store.TargetSecret, s.Name).String()
	plan := f.plan(s.Name)
	if f.journal != nil {
		if nonce, ok := s.Annotations[AnnotationNonce]; ok && shapedAsCreated(s, plan) {
			found, err := fx.find(ctx, store.RunRecordParams{Namespace: f.cmd.Spec.Namespace, Command: f.cmd.Metadata.MutationID,
				Kind: store.RecordAuthorityCall, Step: stepCreateSecret, Target: target, Digest: nonceDigest(nonce)})
			if err != nil {
				return "", "", err
			}
			if found != nil {
				d, err := detailOf[createDetail](found.Record)
				if err != nil {
					return "", "", err
				}
				if slices.Equal(d.Keys, plannedKeys(plan)) {
					return AuthorshipProven, found.Run, nil
				}
			}
		}
	}
	if p.found[s.Name] || p.orphanUID[s.Name] != "" {
		// This run found (and orphaned) the generator-backed ExternalSecret
		// that produced it. Being listed in adopt proves nothing by itself.
		return AuthorshipAdopted, p.run, nil
	}
	if f.journal == nil || s.UID == "" {
		return AuthorshipUnproven, "", nil
	}
	// The newest verdict (a 409's resolution) or read (the observation a
	// patch was built from) of an earlier run that names s's UID.
	for _, q := range []struct {
		kind store.RecordKind
		step string
	}{{store.RecordResolution, stepCreateSecret}, {store.RecordObservation, stepReadSecret}} {
		found, err := fx.find(ctx, store.RunRecordParams{Namespace: f.cmd.Spec.Namespace, Command: f.cmd.Metadata.MutationID,
			Kind: q.kind, Step: q.step, Target: target, UID: string(s.UID)})
		if err != nil {
			return "", "", err
		}
		if found != nil {
			d, err := detailOf[secretDetail](found.Record)
			if err != nil {
				return "", "", err
			}
			switch d.Authorship {
			case AuthorshipAdopted, AuthorshipProven:
				by := d.By
				if by == "" {
					by = found.Run
				}
				return d.Authorship, by, nil
			}
		}
	}
	return AuthorshipUnproven, "", nil
}

// shapedAsCreated: s is what a create of plan makes: Opaque, exactly the
// planned keys, not being deleted.
func shapedAsCreated(s *corev1.Secret, plan Secret) bool {
	if s.DeletionTimestamp != nil || s.Type != corev1.SecretTypeOpaque || len(s.Data) != len(plan.Keys) {
		return false
	}
	for _, k := range plan.Keys {
		if _, ok := s.Data[k.Name]; !ok {
			return false
		}
	}
	return true
}

// keptProblem is why a Secret found in place may not be kept (a refusal
// reason), or "": the same checks whether it is complete or lacks
// something, found by a read or by the resolution of a create's 409.
//
//   - terminating: being deleted, it is about to be gone;
//   - its type: a Secret keyledger did not adopt must be Opaque (or have
//     no type), what a create makes. An adopted Secret keeps the type
//     External Secrets gave it (a Secret's type is immutable, and keyledger
//     never replaces a Secret): Opaque, or kubernetes.io/basic-auth, whose
//     keys (username, password) a credential plan can describe. Every other
//     type needs content keyledger neither generates nor checks (TLS
//     material, a registry configuration, SSH keys, a ServiceAccount token
//     its controller writes), so it is refused;
//   - immutable, when something must be patched in (a complete immutable
//     Secret needs no write, and is kept).
func keptProblem(s *corev1.Secret, c change, adopted bool) string {
	switch {
	case s.DeletionTimestamp != nil:
		return ReasonSecretTerminating
	case !acceptedType(s.Type, adopted):
		return ReasonSecretWrongType
	case !c.empty() && s.Immutable != nil && *s.Immutable:
		return ReasonSecretImmutable
	}
	return ""
}

// acceptedType: the Secret types a kept Secret may have (see keptProblem).
func acceptedType(t corev1.SecretType, adopted bool) bool {
	return t == corev1.SecretTypeOpaque || t == "" || adopted && t == corev1.SecretTypeBasicAuth
}
