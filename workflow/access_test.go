package workflow

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/kube"
)

// startingServer is an API server whose authorizer still denies every
// review; /readyz answers readyz.
func startingServer(t *testing.T, readyz int) kube.Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.WriteHeader(readyz)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/selfsubjectaccessreviews") {
			_, _ = w.Write([]byte(`{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","status":{"allowed":false}}`))
			return
		}
		http.Error(w, "unexpected request", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, BearerToken: "t", Timeout: 10 * time.Second}
	client, err := kube.NewClient(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { kube.Scrub(cfg) })
	return client
}

// A permission check denied by a server that says it is not ready yet is
// the server's state (unavailable: 69, a rerun settles it); denied by a
// ready server, it is the identity's rights (a mismatch: 77).
func TestCheckAccessDeniedWhileTheServerStarts(t *testing.T) {
	t.Parallel()
	plan := Plan{Access: []kube.AccessCheck{kube.SecretCheck("get", "ns", "keyring", true)}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	err := checkAccess(context.Background(), Deps{Kube: startingServer(t, http.StatusInternalServerError)}, plan, log)
	var unavailable *Unavailable
	require.True(t, errors.As(err, &unavailable), "%v", err)
	require.Equal(t, "kubernetes", unavailable.Dependency)
	require.True(t, errors.Is(err, kube.ReasonServerError), "%v", err)

	err = checkAccess(context.Background(), Deps{Kube: startingServer(t, http.StatusOK)}, plan, log)
	var mismatch *PermissionMismatch
	require.True(t, errors.As(err, &mismatch), "%v", err)
}

// A request forbidden while the server says it is not ready ends the run as
// a server error, where it stopped (the Uncertain around it kept); forbidden
// by a ready server, it stays forbidden.
func TestForbiddenWhileTheServerStarts(t *testing.T) {
	t.Parallel()
	forbidden := func() error {
		return &Uncertain{Reason: "interrupted", Err: &Unavailable{Dependency: "kubernetes",
			Err: &kube.Error{Failure: kube.Failure{Code: http.StatusForbidden, Reason: kube.ReasonForbidden, Definite: true}, Err: errors.New("forbidden")}}}
	}
	err := startingForbidden(context.Background(), Deps{Kube: startingServer(t, http.StatusInternalServerError)}, forbidden())
	require.True(t, errors.Is(err, kube.ReasonServerError), "%v", err)
	require.False(t, errors.Is(err, kube.ReasonForbidden), "%v", err)
	require.True(t, errors.As(err, new(*Uncertain)), "where the run stopped is kept")

	err = startingForbidden(context.Background(), Deps{Kube: startingServer(t, http.StatusOK)}, forbidden())
	require.True(t, errors.Is(err, kube.ReasonForbidden), "%v", err)
}
