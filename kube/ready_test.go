package kube

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// readyzServer answers /readyz with code and body, and counts its asks.
func readyzServer(t *testing.T, code int, body string) (*Client, *int) {
	t.Helper()
	asked := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || r.Method != http.MethodGet {
			http.Error(w, "unexpected request", http.StatusTeapot)
			return
		}
		asked++
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, BearerToken: "t", Timeout: 10 * time.Second}
	client, err := NewClient(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { Scrub(cfg) })
	return client, &asked
}

// A server that answers it is not ready is a server error (69, a rerun
// settles it), carrying nothing of its answer; every other answer leaves
// a failed permission check what it is.
func TestNotReady(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		code     int
		body     string
		notReady bool
	}{
		{"starting", http.StatusInternalServerError, "[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\nreadyz check failed", true},
		{"unavailable", http.StatusServiceUnavailable, "", true},
		{"ready", http.StatusOK, "ok", false},
		{"forbidden to ask", http.StatusForbidden, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`, false},
		{"unauthorized", http.StatusUnauthorized, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			client, asked := readyzServer(t, c.code, c.body)
			err := NotReady(context.Background(), client)
			require.Equal(t, 1, *asked)
			if !c.notReady {
				require.NoError(t, err)
				return
			}
			var ke *Error
			require.True(t, errors.As(err, &ke), "%v", err)
			require.Equal(t, ReasonServerError, ke.Failure.Reason)
			require.Equal(t, c.code, ke.Failure.Code)
			require.NotContains(t, err.Error(), "bootstrap-roles", "nothing of the server's answer")
			require.NotContains(t, err.Error(), "127.0.0.1", "no address")
		})
	}
}

// Without a server to ask (a fake clientset's nil REST client) nothing is
// asked and nothing is hidden.
func TestNotReadyWithoutAServer(t *testing.T) {
	t.Parallel()
	require.NoError(t, NotReady(context.Background(), nilREST{}))
}

type nilREST struct{ Interface }

func (nilREST) CoreREST() rest.Interface { return (*rest.RESTClient)(nil) }
