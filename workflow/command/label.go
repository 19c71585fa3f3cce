package command

import (
	"crypto/sha256"
	"encoding/hex"
)

// How a Job and its pod say which command they run. A mutation ID
// (ValidIdentifier: up to 128 characters, ':' allowed) is not always a
// Kubernetes label value (at most 63 characters, no ':'), so the label
// holds a digest of it, which always is, and the annotation the ID itself:
//
//	kubectl get jobs,pods -l keyledger.dev/mutation-id-hash=$(printf %s "$ID" | sha256sum | cut -c1-32)
const (
	// LabelMutationIDHash is MutationIDHash of the command's mutationId.
	LabelMutationIDHash = "keyledger.dev/mutation-id-hash"
	// AnnotationMutationID is the command's mutationId as written.
	AnnotationMutationID = "keyledger.dev/mutation-id"
)

// MutationIDHash is the value of LabelMutationIDHash for a mutation ID: the
// first 32 hex digits of its SHA-256.
func MutationIDHash(mutationID string) string {
	sum := sha256.Sum256([]byte(mutationID))
	return hex.EncodeToString(sum[:])[:32]
}
