package workflow

import (
	"context"

	"github.com/keyledger/keyledger/store"
)

// Family is one kind of operation plugged into the engine.
type Family interface {
	// Decide reads the durable facts and says what to do next. It is asked in
	// the prepared and answered states.
	Decide(ctx context.Context, run *Run) (Decision, error)
	// Resolve re-reads the durable facts after the call recorded in call
	// (an authority_call record) ended without a known outcome.
	Resolve(ctx context.Context, run *Run, call store.Record) (Verdict, error)
	// ConfirmReplay is asked before an operation the journal says completed
	// is reported as a replay (existing): it reads the cluster in this run,
	// with the rights the family already holds (nothing beyond its Rules and
	// Access), and returns nil when the cluster shows the effect the
	// journal says the operation had, a *Contradiction naming what differs
	// when it does not, and an error when the read failed (the run is then
	// unavailable, never existing). It must only read: it is asked by
	// `keyledger plan` too. A journal is far easier to write than the
	// objects it describes, so a replay is believed only with the cluster's
	// agreement.
	ConfirmReplay(ctx context.Context, run *Run) (*Contradiction, error)
}

// ReasonCallNotAsked: a call the journal holds, which resolution found not
// applied, that the family's decision made now from the cluster and the
// command would not make (Asker): it is not sent again, and the run refuses
// with this reason. A journal record is evidence of what was asked once,
// never an instruction to ask it again.
const ReasonCallNotAsked = "call-not-asked"

// Asker is implemented by a family whose calls the journal could hold
// without the cluster asking for them any more (or ever: a record the
// journal's role forged). Before the engine sends again a call that
// resolution found not applied (Verdict.Retry), it asks Asks: why is ""
// when the family's decision, made now from the cluster and the command
// and not from the journal's word, would make that same call; otherwise a
// content-free sentence, and the run refuses (ReasonCallNotAsked) sending
// nothing. notes are what the family read to decide (a probe), journaled
// either way. A family that does not implement it has every retry sent.
type Asker interface {
	Asks(ctx context.Context, run *Run, call *Call) (why string, notes []store.Record, err error)
}

// callNotAsked is the summary of a call-not-asked refusal.
type callNotAsked struct {
	Step   string `json:"step"`
	Target string `json:"target"`
	Why    string `json:"why"`
}

// Decision is what Decide returns: exactly one of Complete, Refuse, Call,
// Calls or End, or only Notes.
type Decision struct {
	// Notes are the records appended before the decision takes effect, in
	// order (probe outcomes, the observation that led to a call, to a
	// completion or to a refusal): the one channel for "journal this
	// first". Notes alone append without moving the state, and the engine
	// asks Decide again.
	Notes []store.Record
	// End ends the run with this error (an *Uncertain or *Unavailable)
	// once Notes are journaled, without moving the state: what the
	// decision learned is kept, and a rerun decides again from it.
	End error
	// Complete ends the operation as done (for example an exact replay).
	Complete *Completion
	// Refuse ends the operation fail-closed.
	Refuse *Refusal
	// Call sends one authority call.
	Call *Call
	// Calls sends a batch of independent, non-final calls: their records
	// are committed in one transaction, they are sent concurrently, and
	// their answers are committed in one transaction.
	Calls []*Call
}

// Completion ends an operation with its effect confirmed.
type Completion struct {
	Outcome Outcome
	// Summary is the content-free description of the result stored in the
	// completion record and printed in the outcome line.
	Summary store.Detail
}

// Refusal ends an operation fail-closed.
type Refusal struct {
	// Reason is a stable kebab-case word.
	Reason string
	// Summary is what was observed, content-free, stored in the refusal
	// record and printed in the outcome line.
	Summary store.Detail
}

// Call is one authority call. Its record is committed before Send runs.
type Call struct {
	// Step names the call in the journal (kebab-case, e.g. "replace-keyring").
	Step string
	// Target is the object the call acts on (journaled as its text,
	// e.g. "secret/db"); attempts are counted per step and target.
	Target store.Target
	// Verb is the API verb the call sends (what keyledger plan shows).
	Verb Verb
	// UID and ResourceVersion are the call's preconditions; Digest the
	// digest of the intended result.
	UID, ResourceVersion, Digest string
	// Detail holds content-free facts about the call (the family's typed
	// detail of the step, store.DetailOf).
	Detail store.Detail
	// Final marks the last call: when it is applied the operation completes
	// with outcome completed and Summary.
	Final bool
	// Summary describes the intended result (content-free); it becomes the
	// completion's summary when a Final call is applied, and the refusal's
	// when the authority rejects the call.
	Summary store.Detail
	// Send performs the call. It must classify every answer and never retry.
	Send func(ctx context.Context) Answer
	// Foresee, when set, tells from a read alone (it must never write)
	// that the authority would not apply the call as intended, and how it
	// would answer (a create of an object that exists: 409): that answer
	// and true. A run sends the call and never asks it; a held-back call
	// (keyledger plan) is answered by it, or as applied.
	Foresee func(ctx context.Context) (Answer, bool, error)
}

// Verb is the API verb of a call.
type Verb string

// The verbs keyledger's calls send.
const (
	VerbCreate Verb = "create"
	VerbUpdate Verb = "update"
	VerbPatch  Verb = "patch"
	VerbDelete Verb = "delete"
)

// AnswerStatus classifies what came back for a call: the status of its
// authority_result record.
type AnswerStatus = store.Status

const (
	// Applied: the authority answered and the result is what was intended.
	Applied AnswerStatus = "applied"
	// Unknown: no usable answer (lost response, reset, timeout, 5xx) or a
	// conflict; the durable facts must be re-read.
	Unknown AnswerStatus = "unknown"
	// Rejected: the authority definitely refused and nothing was applied.
	Rejected AnswerStatus = "rejected"
)

// Answer is what a call's Send saw.
type Answer struct {
	Status AnswerStatus
	// Code is the HTTP status, 0 when none arrived.
	Code int
	// UID, ResourceVersion and Digest describe the returned object.
	UID, ResourceVersion, Digest string
	// Reason is a kebab-case word (conflict, lost, timeout, server-error, ...).
	Reason store.Reason
	Detail store.Detail
	// Summary, when set on the applied answer of a Final call, replaces the
	// call's Summary as the completion's: what only the answer knows (the
	// UID of a created object).
	Summary store.Detail
}

// VerdictKind is what resolution concluded: the status of its resolution
// record.
type VerdictKind = store.Status

const (
	// Ours: the durable facts show this operation's intended result.
	Ours VerdictKind = "ours"
	// NotApplied: the call did not take effect; Retry may be sent again.
	NotApplied VerdictKind = "not-applied"
	// Theirs: something else changed the object; fail closed.
	Theirs VerdictKind = "theirs"
	// Undetermined: the facts could not be read; the outcome stays unknown.
	Undetermined VerdictKind = "undetermined"
)

// Verdict is what Resolve returns.
type Verdict struct {
	Kind   VerdictKind
	Reason store.Reason
	// UID, ResourceVersion and Digest describe what the re-read showed.
	UID, ResourceVersion, Digest string
	Detail                       store.Detail
	// Retry is the call to send when Kind is NotApplied (same step).
	Retry *Call
	// Summary describes what was found (content-free): the completion's
	// summary when Kind is Ours and the call was final, the refusal's when
	// Kind is Theirs.
	Summary store.Detail
	// Err explains an Undetermined verdict.
	Err error
	// Kept marks an Ours verdict whose intended result was found in place,
	// not written by this operation (a create-if-absent that found the
	// object): the resolution record says so ("kept" in its detail), and a
	// refused batch lists the target as kept, never as applied.
	Kept bool
}
