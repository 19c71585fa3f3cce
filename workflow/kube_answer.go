package workflow

import (
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
)

// KubeCall says what a failed Kubernetes call was meant to do, which decides
// what its failure means.
type KubeCall int

const (
	// KubeWrite: a create, replace, patch, or a delete whose adapter already
	// reads a 404 as done. A definite refusal is Rejected; anything else
	// (lost, 5xx, 409, 404, a failed patch test) is Unknown, settled by
	// re-reading.
	KubeWrite KubeCall = iota
	// KubeDelete: a delete with UID (and resourceVersion) preconditions whose
	// effect sought is the object's absence. A 404 means it is gone: Applied
	// (AnswerAbsent); a 409 means a precondition failed: Unknown
	// (AnswerPreconditionFailed), settled by re-reading. Anything else as
	// KubeWrite.
	KubeDelete
)

// Answer reasons KubeAnswer gives besides the kube.Reason words.
const (
	// AnswerAbsent: a delete found the object already gone (404).
	AnswerAbsent store.Reason = "absent"
	// AnswerPreconditionFailed: a delete's UID or resourceVersion
	// precondition did not hold (409).
	AnswerPreconditionFailed store.Reason = "precondition-failed"
)

// KubeAnswer turns a failed Kubernetes call of kind call into its answer
// (applied, unknown or rejected; "not applied" is only ever a resolution's
// verdict after re-reading). This is the one place a family's Send reads a
// kube failure; the answer carries the HTTP status and the kube.Reason word
// (or AnswerAbsent, AnswerPreconditionFailed).
func KubeAnswer(call KubeCall, err error) Answer {
	fail := kube.Classify(err)
	a := Answer{Status: Unknown, Code: fail.Code, Reason: store.Reason(fail.Reason)}
	switch {
	case call == KubeDelete && fail.Reason == kube.ReasonNotFound:
		a.Status, a.Reason = Applied, AnswerAbsent
	case call == KubeDelete && fail.Reason == kube.ReasonConflict:
		a.Reason = AnswerPreconditionFailed
	case fail.Definite:
		a.Status = Rejected
	}
	return a
}

// DeleteVerdicts are how a family words the settled cases of a delete it
// sent with preconditions (its journal's reasons and details).
type DeleteVerdicts struct {
	// Gone: the object is absent.
	Gone Verdict
	// Replaced: another UID holds the name (the object the call named is
	// gone; whose the newcomer is, the family says).
	Replaced Verdict
	// Terminating: the object the call named carries a deletionTimestamp
	// (finalizers hold it).
	Terminating Verdict
}

// ResolveDelete settles a delete sent with UID (and resourceVersion)
// preconditions whose outcome is unknown, from one re-read of the object it
// named (obj, err; obj is not looked at when err is set): absent is v.Gone
// (UID: the call's), a failed read undetermined (read-failed), another UID
// under the name v.Replaced (UID and resourceVersion: the newcomer's), a
// deletionTimestamp v.Terminating (the call's UID, the re-read's
// resourceVersion). settled is false when the object the call named is
// still there and not being deleted: the family decides what that means (not
// applied, with a retry carrying this read's preconditions, or someone
// else's). It is the one resolution of a delete with preconditions, for
// every family.
func ResolveDelete(call store.Record, obj metav1.Object, err error, v DeleteVerdicts) (verdict Verdict, settled bool) {
	switch {
	case errors.Is(err, kube.ReasonNotFound):
		verdict = v.Gone
		verdict.UID = call.UID
	case err != nil:
		return Verdict{Kind: Undetermined, Reason: "read-failed", Err: err}, true
	case string(obj.GetUID()) != call.UID:
		verdict = v.Replaced
		verdict.UID, verdict.ResourceVersion = string(obj.GetUID()), obj.GetResourceVersion()
	case obj.GetDeletionTimestamp() != nil:
		verdict = v.Terminating
		verdict.UID, verdict.ResourceVersion = call.UID, obj.GetResourceVersion()
	default:
		return Verdict{}, false
	}
	return verdict, true
}
