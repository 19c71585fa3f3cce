package kube

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var secrets = schema.GroupResource{Resource: "secrets"}

// patchTestFailed is what the API server answers when a JSON patch's test
// operation does not hold: 422 naming no object.
func patchTestFailed() error {
	return apierrors.NewGenericServerResponse(422, "patch", schema.GroupResource{}, "", "the server rejected our request due to an error in our request", 0, false)
}

func invalidSecret() error {
	return apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "s", field.ErrorList{field.Invalid(field.NewPath("data"), "x", "bad")})
}

func TestClassifyEveryReason(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want Failure
	}{
		{"lost", errors.New("connection reset by peer"), Failure{Reason: ReasonLost}},
		{"conflict", apierrors.NewConflict(secrets, "s", errors.New("precondition")), Failure{Code: 409, Reason: ReasonConflict}},
		{"not-found", apierrors.NewNotFound(secrets, "s"), Failure{Code: 404, Reason: ReasonNotFound}},
		{"already-exists", apierrors.NewAlreadyExists(secrets, "s"), Failure{Code: 409, Reason: ReasonAlreadyExists}},
		{"test-failed", wrapPatch(patchTestFailed()), Failure{Code: 422, Reason: ReasonTestFailed}},
		{"forbidden", apierrors.NewForbidden(secrets, "s", errors.New("no")), Failure{Code: 403, Reason: ReasonForbidden, Definite: true}},
		{"unauthorized", apierrors.NewUnauthorized("no"), Failure{Code: 401, Reason: ReasonUnauthorized, Definite: true}},
		{"invalid", invalidSecret(), Failure{Code: 422, Reason: ReasonInvalid, Definite: true}},
		{"bad-request", apierrors.NewBadRequest("no"), Failure{Code: 400, Reason: ReasonBadRequest, Definite: true}},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), Failure{Code: 429, Reason: ReasonThrottled}},
		{"server-error", apierrors.NewInternalError(errors.New("boom")), Failure{Code: 500, Reason: ReasonServerError}},
		{"unexpected-status", apierrors.NewGenericServerResponse(418, "get", secrets, "s", "", 0, false), Failure{Code: 418, Reason: ReasonUnexpectedStatus, Definite: true}},
	}
	seen := map[Reason]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, Classify(c.err))
			// As the adapters return it: errors.Is matches its reason and
			// no other, the message and apierrors' view are unchanged.
			wrapped := wrap(c.err)
			if c.want.Reason == ReasonTestFailed {
				wrapped = c.err
			}
			require.Equal(t, c.want, Classify(wrapped))
			if c.want.Reason == ReasonLost {
				// No answer: keyledger's redacted words, never the client's.
				require.Equal(t, "kubernetes request: no answer (connection-reset)", wrapped.Error())
			} else {
				require.Equal(t, c.err.Error(), wrapped.Error())
			}
			require.Equal(t, apierrors.ReasonForError(c.err), apierrors.ReasonForError(wrapped))
			for _, r := range Reasons() {
				require.Equal(t, r == c.want.Reason, errors.Is(wrapped, r), "errors.Is(%s, %s)", c.name, r)
			}
		})
		require.Equal(t, string(c.want.Reason), c.name)
		seen[c.want.Reason] = true
	}
	require.Len(t, seen, len(Reasons()), "every Reason has a case")
}

func TestWrapPatchKeepsValidationRefusals(t *testing.T) {
	t.Parallel()
	// A 422 naming the Secret is a validation refusal, not a failed test.
	require.Equal(t, Failure{Code: 422, Reason: ReasonInvalid, Definite: true}, Classify(wrapPatch(invalidSecret())))
	require.Equal(t, Failure{Code: 404, Reason: ReasonNotFound}, Classify(wrapPatch(apierrors.NewNotFound(secrets, "s"))))
	require.NoError(t, wrapPatch(nil))
	require.NoError(t, wrap(nil))
}
