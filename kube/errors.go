package kube

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Failure says what a failed API call tells about its effect.
type Failure struct {
	// Code is the HTTP status, 0 when no response arrived.
	Code int
	// Reason is a stable kebab-case word.
	Reason string
	// Definite is true when the API server answered that it did not apply
	// the request (403, 400, 422 and the like); false when the effect is
	// unknown (no response, timeout, 5xx) or the object changed (409, 404),
	// which only re-reading the object can settle.
	Definite bool
}

// Classify reads a client-go error.
func Classify(err error) Failure {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return Failure{Reason: "lost"}
	}
	code := int(status.Status().Code)
	switch {
	case apierrors.IsConflict(err):
		return Failure{Code: code, Reason: "conflict"}
	case apierrors.IsNotFound(err):
		return Failure{Code: code, Reason: "not-found"}
	case apierrors.IsAlreadyExists(err):
		return Failure{Code: code, Reason: "already-exists"}
	case apierrors.IsForbidden(err):
		return Failure{Code: code, Reason: "forbidden", Definite: true}
	case apierrors.IsUnauthorized(err):
		return Failure{Code: code, Reason: "unauthorized", Definite: true}
	case apierrors.IsInvalid(err):
		return Failure{Code: code, Reason: "invalid", Definite: true}
	case apierrors.IsBadRequest(err):
		return Failure{Code: code, Reason: "bad-request", Definite: true}
	case apierrors.IsTooManyRequests(err):
		return Failure{Code: code, Reason: "throttled"}
	case code >= http.StatusInternalServerError || code == 0:
		return Failure{Code: code, Reason: "server-error"}
	default:
		return Failure{Code: code, Reason: "unexpected-status", Definite: code >= 400 && code < 500}
	}
}
