package workflow

import (
	"github.com/keyledger/keyledger/kube"
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
	AnswerAbsent = "absent"
	// AnswerPreconditionFailed: a delete's UID or resourceVersion
	// precondition did not hold (409).
	AnswerPreconditionFailed = "precondition-failed"
)

// KubeAnswer turns a failed Kubernetes call of kind call into its answer
// (applied, unknown or rejected; "not applied" is only ever a resolution's
// verdict after re-reading). This is the one place a family's Send reads a
// kube failure; the answer carries the HTTP status and the kube.Reason word
// (or AnswerAbsent, AnswerPreconditionFailed).
func KubeAnswer(call KubeCall, err error) Answer {
	fail := kube.Classify(err)
	a := Answer{Status: Unknown, Code: fail.Code, Reason: string(fail.Reason)}
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
