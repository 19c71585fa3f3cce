package workflow

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
)

// TestKubeAnswerEveryReason: every kube.Reason, for a write and for a delete
// with preconditions, gives its one answer.
func TestKubeAnswerEveryReason(t *testing.T) {
	t.Parallel()
	secrets := schema.GroupResource{Resource: "secrets"}
	type want struct {
		status AnswerStatus
		code   int
		reason store.Reason
	}
	cases := []struct {
		reason        kube.Reason
		err           error
		write, delete want
	}{
		{kube.ReasonLost, errors.New("connection reset by peer"),
			want{Unknown, 0, "lost"}, want{Unknown, 0, "lost"}},
		{kube.ReasonConflict, apierrors.NewConflict(secrets, "s", errors.New("precondition")),
			want{Unknown, 409, "conflict"}, want{Unknown, 409, AnswerPreconditionFailed}},
		{kube.ReasonNotFound, apierrors.NewNotFound(secrets, "s"),
			want{Unknown, 404, "not-found"}, want{Applied, 404, AnswerAbsent}},
		{kube.ReasonAlreadyExists, apierrors.NewAlreadyExists(secrets, "s"),
			want{Unknown, 409, "already-exists"}, want{Unknown, 409, "already-exists"}},
		{kube.ReasonTestFailed, &kube.Error{Failure: kube.Failure{Code: 422, Reason: kube.ReasonTestFailed}, Err: errors.New("test failed")},
			want{Unknown, 422, "test-failed"}, want{Unknown, 422, "test-failed"}},
		{kube.ReasonForbidden, apierrors.NewForbidden(secrets, "s", errors.New("no")),
			want{Rejected, 403, "forbidden"}, want{Rejected, 403, "forbidden"}},
		{kube.ReasonUnauthorized, apierrors.NewUnauthorized("no"),
			want{Rejected, 401, "unauthorized"}, want{Rejected, 401, "unauthorized"}},
		{kube.ReasonInvalid, apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "s", field.ErrorList{field.Invalid(field.NewPath("data"), "x", "bad")}),
			want{Rejected, 422, "invalid"}, want{Rejected, 422, "invalid"}},
		{kube.ReasonBadRequest, apierrors.NewBadRequest("no"),
			want{Rejected, 400, "bad-request"}, want{Rejected, 400, "bad-request"}},
		{kube.ReasonThrottled, apierrors.NewTooManyRequests("slow down", 1),
			want{Unknown, 429, "throttled"}, want{Unknown, 429, "throttled"}},
		{kube.ReasonServerError, apierrors.NewInternalError(errors.New("boom")),
			want{Unknown, 500, "server-error"}, want{Unknown, 500, "server-error"}},
		{kube.ReasonUnexpectedStatus, apierrors.NewGenericServerResponse(418, "get", secrets, "s", "", 0, false),
			want{Rejected, 418, "unexpected-status"}, want{Rejected, 418, "unexpected-status"}},
	}
	seen := map[kube.Reason]bool{}
	for _, c := range cases {
		t.Run(string(c.reason), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.reason, kube.Classify(c.err).Reason, "the case's error has its reason")
			for call, w := range map[KubeCall]want{KubeWrite: c.write, KubeDelete: c.delete} {
				require.Equal(t, Answer{Status: w.status, Code: w.code, Reason: w.reason}, KubeAnswer(call, c.err), "call kind %d", call)
			}
		})
		seen[c.reason] = true
	}
	for _, r := range kube.Reasons() {
		require.True(t, seen[r], "no case for %s", r)
	}
}
