package kube

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Reason is a stable kebab-case word for what a failed API call tells. Each
// Reason is also a sentinel error: every API error a kube adapter returns
// matches its reason with errors.Is, e.g. errors.Is(err, kube.ReasonNotFound).
type Reason string

// Error makes a Reason usable as an errors.Is target.
func (r Reason) Error() string { return "kubernetes: " + string(r) }

// The reasons Classify gives.
const (
	// ReasonLost: no answer from the API server (reset, timeout, refused).
	ReasonLost Reason = "lost"
	// ReasonConflict: 409 Conflict (a resourceVersion or UID precondition
	// failed, or the object changed since read).
	ReasonConflict Reason = "conflict"
	// ReasonNotFound: 404, the object (or its kind) is absent.
	ReasonNotFound Reason = "not-found"
	// ReasonAlreadyExists: 409 AlreadyExists to a create.
	ReasonAlreadyExists Reason = "already-exists"
	// ReasonTestFailed: 422 to a JSON patch whose test operation did not
	// hold on the stored object (no object named in the details, unlike a
	// validation failure). Only PatchSecret gives it.
	ReasonTestFailed Reason = "test-failed"
	// ReasonForbidden: 403, refused by authorization or admission.
	ReasonForbidden Reason = "forbidden"
	// ReasonUnauthorized: 401.
	ReasonUnauthorized Reason = "unauthorized"
	// ReasonInvalid: 422 validation failure.
	ReasonInvalid Reason = "invalid"
	// ReasonBadRequest: 400.
	ReasonBadRequest Reason = "bad-request"
	// ReasonThrottled: 429.
	ReasonThrottled Reason = "throttled"
	// ReasonServerError: 5xx (or a status without a code).
	ReasonServerError Reason = "server-error"
	// ReasonUnexpectedStatus: any other status.
	ReasonUnexpectedStatus Reason = "unexpected-status"
)

// Reasons lists every Reason, for tests that cover them all.
func Reasons() []Reason {
	return []Reason{ReasonLost, ReasonConflict, ReasonNotFound, ReasonAlreadyExists, ReasonTestFailed,
		ReasonForbidden, ReasonUnauthorized, ReasonInvalid, ReasonBadRequest, ReasonThrottled,
		ReasonServerError, ReasonUnexpectedStatus}
}

// Failure says what a failed API call tells about its effect.
type Failure struct {
	// Code is the HTTP status, 0 when no response arrived.
	Code int
	// Reason says what kind of failure it is.
	Reason Reason
	// Definite is true when the API server answered that it did not apply
	// the request (403, 400, 422 and the like); false when the effect is
	// unknown (no response, timeout, 5xx) or the object changed (409, 404),
	// which only re-reading the object can settle.
	Definite bool
	// Timeout is true when no answer came because a deadline passed (the
	// request's, or the caller's context).
	Timeout bool
}

// Error is a failed API call as the kube adapters return it: the client's
// error (errors.As to apierrors.APIStatus unchanged) with its Failure.
// errors.Is(err, r) holds for the Failure's Reason r. Its message never
// carries the API server's address or a request path (see Error).
type Error struct {
	Failure Failure
	// Err is the client's error.
	Err error
}

// Error is the redacted message, as the journal redacts PostgreSQL's: for a
// call the API server answered, its status message (with any URL or
// host:port an admission webhook's failure may quote replaced); for a call
// that got no answer, the operation (verb and resource), the reason class
// and a timeout flag, never the URL, host or path client-go and net put in
// their messages.
func (e *Error) Error() string {
	var status apierrors.APIStatus
	if errors.As(e.Err, &status) {
		return scrubAddresses(e.Err.Error())
	}
	return noAnswerMessage(e.Err)
}

// Unwrap returns the client's error.
func (e *Error) Unwrap() error { return e.Err }

// Is matches the Failure's Reason.
func (e *Error) Is(target error) bool {
	r, ok := target.(Reason)
	return ok && r == e.Failure.Reason
}

// wrap classifies a client error; nil stays nil.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Failure: Classify(err), Err: err}
}

// Classify reads a failed call's error: the Failure an adapter attached, or
// else what the client-go error says.
func Classify(err error) Failure {
	var ke *Error
	if errors.As(err, &ke) {
		return ke.Failure
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return Failure{Reason: ReasonLost, Timeout: isTimeout(err)}
	}
	code := int(status.Status().Code)
	switch {
	case apierrors.IsConflict(err):
		return Failure{Code: code, Reason: ReasonConflict}
	case apierrors.IsNotFound(err):
		return Failure{Code: code, Reason: ReasonNotFound}
	case apierrors.IsAlreadyExists(err):
		return Failure{Code: code, Reason: ReasonAlreadyExists}
	case apierrors.IsForbidden(err):
		return Failure{Code: code, Reason: ReasonForbidden, Definite: true}
	case apierrors.IsUnauthorized(err):
		return Failure{Code: code, Reason: ReasonUnauthorized, Definite: true}
	case apierrors.IsInvalid(err):
		return Failure{Code: code, Reason: ReasonInvalid, Definite: true}
	case apierrors.IsBadRequest(err):
		return Failure{Code: code, Reason: ReasonBadRequest, Definite: true}
	case apierrors.IsTooManyRequests(err):
		return Failure{Code: code, Reason: ReasonThrottled}
	case code >= http.StatusInternalServerError || code == 0:
		return Failure{Code: code, Reason: ReasonServerError}
	default:
		return Failure{Code: code, Reason: ReasonUnexpectedStatus, Definite: code >= 400 && code < 500}
	}
}

// wrapPatch classifies the answer to a JSON patch: a 422 that names no object
// is the patch's test operation failing on the stored object (validation
// failures name the object), so the object changed since read: not a
// refusal, settled by re-reading.
func wrapPatch(err error) error {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		st := status.Status()
		if st.Code == http.StatusUnprocessableEntity && (st.Details == nil || st.Details.Kind == "" && st.Details.Name == "") {
			return &Error{Failure: Failure{Code: http.StatusUnprocessableEntity, Reason: ReasonTestFailed}, Err: err}
		}
	}
	return wrap(err)
}

// wrapped passes a client call's result through, its error classified.
func wrapped[T any](v T, err error) (T, error) { return v, wrap(err) }

// Wrap classifies a client error as every adapter does (a *Error with its
// Failure); nil stays nil. Test doubles of the adapters answer through it.
func Wrap(err error) error { return wrap(err) }

// WrapPatch classifies a JSON patch's failure as PatchSecret does.
func WrapPatch(err error) error { return wrapPatch(err) }
