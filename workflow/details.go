package workflow

import "github.com/keyledger/keyledger/store"

// The engine's own record details: what it adds to the details and
// summaries the families give (store.Merge), each a typed value whose JSON
// tags are the journal's schema.

// attemptLimit is the summary of a refusal for a step and target already
// sent store.MaxCallAttempt times.
type attemptLimit struct {
	Step     string `json:"step"`
	Target   string `json:"target"`
	Attempts int    `json:"attempts"`
}

// AnswerCode is what the engine adds to an authority_result's detail: the
// HTTP status of the answer (none when no answer arrived).
type AnswerCode struct {
	Code int `json:"code,omitempty"`
}

// withCode is detail with the answer's HTTP status added (the family's
// detail wins a clash, as it always has).
func withCode(detail store.Detail, code int) store.Detail {
	if code == 0 {
		return detail
	}
	return store.Merge(store.DetailOf(AnswerCode{Code: code}), detail)
}

// KeptResolution is what the engine adds to a resolution's detail when its
// ours verdict found the result in place (Verdict.Kept).
type KeptResolution struct {
	Kept bool `json:"kept,omitempty"`
}

// batchTargets is what a refused batch's summary adds: the targets the
// batch applied, kept and did not apply.
type batchTargets struct {
	Applied    []string `json:"applied"`
	Kept       []string `json:"kept"`
	NotApplied []string `json:"notApplied"`
}

// rejectedCall is the summary of a batch refused because the authority
// rejected one of its calls: that call's target and the HTTP status of the
// rejection (null when its result record has none).
type rejectedCall struct {
	Rejected string `json:"rejected"`
	Code     *int   `json:"code"`
}
