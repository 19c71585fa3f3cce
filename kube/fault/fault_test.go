package fault

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Parallel()
	r, err := Parse("drop-response:put:/secrets/keyring#2")
	require.NoError(t, err)
	require.Equal(t, Rule{Mode: DropResponse, Method: "PUT", PathContains: "/secrets/keyring", Nth: 2}, r)
	for _, bad := range []string{"", "drop-response", "explode:PUT", "reset:GET#x", "reset:GET#-1"} {
		_, err := Parse(bad)
		require.Error(t, err, bad)
	}
}

// The server really receives the dropped request; the reset one never arrives.
func TestTransport(t *testing.T) {
	t.Parallel()
	var received atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	drop := &http.Client{Transport: New(Rule{Mode: DropResponse, Method: "PUT", Nth: 1}, http.DefaultTransport)}
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/x", strings.NewReader("body"))
	_, err := drop.Do(req)
	require.True(t, IsDropped(err), "got %v", err)
	require.EqualValues(t, 1, received.Load(), "a dropped response must follow a delivered request")
	req, _ = http.NewRequest(http.MethodPut, srv.URL+"/x", strings.NewReader("body"))
	resp, err := drop.Do(req)
	require.NoError(t, err, "only the first match is faulted")
	resp.Body.Close()
	require.EqualValues(t, 2, received.Load())

	failing := &http.Client{Transport: New(Rule{Mode: ServerError, Method: "PUT"}, http.DefaultTransport)}
	req, _ = http.NewRequest(http.MethodPut, srv.URL+"/x", strings.NewReader("body"))
	resp, err = failing.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.EqualValues(t, 3, received.Load(), "a server error follows a delivered request")

	reset := &http.Client{Transport: New(Rule{Mode: Reset, Method: "GET"}, http.DefaultTransport)}
	_, err = reset.Get(srv.URL + "/y")
	require.True(t, errors.Is(err, syscall.ECONNRESET), "got %v", err)
	require.EqualValues(t, 3, received.Load(), "a reset request must never reach the server")
}

// Throttle answers 429 with Retry-After and sends nothing; Unavailable
// sends the request and answers 503 with Retry-After.
func TestTransportRetryAfterModes(t *testing.T) {
	t.Parallel()
	var received atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	for _, tc := range []struct {
		spec     string
		code     int
		received int32
	}{
		{"throttle:PUT#1", http.StatusTooManyRequests, 0},
		{"unavailable-retry-after:PUT#1", http.StatusServiceUnavailable, 1},
	} {
		received.Store(0)
		rule, err := Parse(tc.spec)
		require.NoError(t, err)
		client := &http.Client{Transport: New(rule, http.DefaultTransport)}
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/x", strings.NewReader("body"))
		resp, err := client.Do(req)
		require.NoError(t, err, tc.spec)
		resp.Body.Close()
		require.Equal(t, tc.code, resp.StatusCode, tc.spec)
		require.Equal(t, "1", resp.Header.Get("Retry-After"), tc.spec)
		require.Equal(t, tc.received, received.Load(), tc.spec)
	}
}
