package versioned

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/workflow"
)

// MaxHistoryClaims bounds how many Secrets of a namespace may claim to be
// history of one live Secret (its snapshot slots, and anything labelled or
// annotated with its UID): genuine snapshots (at most MaxHistoryLimit, and
// those still being deleted) and look-alikes together. A versioned write
// or `keyledger history` that finds more fails closed
// (ReasonHistoryTooLarge, exit 2), naming the count, before any write.
const MaxHistoryClaims = 256

// ReasonHistoryTooLarge: more than MaxHistoryClaims Secrets claim to be
// history of the live Secret.
const ReasonHistoryTooLarge = "history-too-large"

// maxClaimMetadata bounds the metadata kept of one claimant, in bytes of
// label and annotation keys and values, finalizers and owner references.
// keyledger writes less than 2 KiB on a snapshot; a claimant with more is
// kept as a stub (name, UID, resourceVersion, deletion state and a nonce
// annotation of a nonce's length), which classify sorts exactly as it would
// the whole: never genuine (its metadata is not a snapshot's), foreign
// for the same reason.
const maxClaimMetadata = 16 << 10

// claims reports whether m claims to be history of the live UID: its name
// is a slot (or starts like one) of the UID, or a label or annotation names
// the UID.
func claims(m *metav1.ObjectMeta, uid types.UID) bool {
	return slotVersion(m.Name, uid) > 0 || strings.HasPrefix(m.Name, slotPrefix(uid)) ||
		m.Labels[LabelSourceUID] == Hash(string(uid)) || m.Annotations[AnnotationSourceUID] == string(uid)
}

// claimant is the filter of kube.VersionedSecrets.ListClaims: it keeps only
// the claimants of uid, each trimmed to at most about maxClaimMetadata.
func claimant(uid types.UID) func(m *metav1.ObjectMeta) bool {
	return func(m *metav1.ObjectMeta) bool {
		if !claims(m, uid) {
			return false
		}
		if metadataSize(m) > maxClaimMetadata {
			stub := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
				DeletionTimestamp: m.DeletionTimestamp}
			if nonce, ok := m.Annotations[AnnotationNonce]; ok && len(nonce) <= 64 {
				stub.Annotations = map[string]string{AnnotationNonce: nonce}
			}
			*m = stub
		}
		return true
	}
}

// metadataSize is the bytes of m's labels, annotations, finalizers and
// owner references (an estimate of 256 bytes per reference).
func metadataSize(m *metav1.ObjectMeta) int {
	n := 256 * len(m.OwnerReferences)
	for k, v := range m.Labels {
		n += len(k) + len(v)
	}
	for k, v := range m.Annotations {
		n += len(k) + len(v)
	}
	for _, f := range m.Finalizers {
		n += len(f)
	}
	return n
}

// historyTooLarge is readInventory's error when more than MaxHistoryClaims
// Secrets claim the live UID: Decide turns it into a journaled refusal,
// ReadHistory into a *workflow.Refused.
type historyTooLarge struct{ count, max int }

func (e *historyTooLarge) Error() string {
	return fmt.Sprintf("%d Secrets in the namespace claim to be history of this Secret (its snapshot slots, or its UID in a label or annotation); at most %d are read",
		e.count, e.max)
}

func (e *historyTooLarge) refused() *workflow.Refused {
	return &workflow.Refused{Reason: ReasonHistoryTooLarge, Detail: e.Error()}
}

// refuseTooLarge is the refusal of a write that found too many claimants.
func (f *family) refuseTooLarge(e *historyTooLarge, live *corev1.Secret) workflow.Decision {
	return f.refuseWith(ReasonHistoryTooLarge, live, summaryDetail{HistoryClaims: &e.count, MaxHistoryClaims: &e.max})
}
