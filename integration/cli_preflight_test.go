package integration

import (
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
)

// unusedLoopbackPort returns 127.0.0.1:PORT where nothing listens (a port
// the kernel handed out and that was closed again): connecting is refused.
func unusedLoopbackPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// loopbackListener accepts and closes TCP connections on 127.0.0.1, and
// optionally writes a line first (a server that does not speak TLS).
func loopbackListener(t *testing.T, greeting string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if greeting != "" {
				_, _ = c.Write([]byte(greeting))
			}
			c.Close()
		}
	}()
	return l.Addr().String()
}

// `keyledger preflight` against the real API server (a loopback TLS
// listener) and loopback canaries: exit 0 only when the API server answers
// TLS and the canary's fate is the expected one; 69 otherwise; one JSON
// line on stdout either way.
func TestIntegrationPreflight(t *testing.T) {
	t.Parallel()
	e := setup(t)
	u, err := url.Parse(e.Kube.Host())
	require.NoError(t, err)
	api := u.Host
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, e.Kube.Config().CAData, 0o600))
	// A TLS server with its own, unrelated certificate.
	other := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(other.Close)
	otherCA := filepath.Join(t.TempDir(), "other-ca.crt")
	require.NoError(t, os.WriteFile(otherCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: other.Certificate().Raw}), 0o600))

	closed := unusedLoopbackPort(t)
	listening := loopbackListener(t, "")
	notTLS := loopbackListener(t, "HTTP/1.1 400 Bad Request\r\n\r\n")

	type want struct {
		code                    int
		outcome                 string
		apiOK, handshake, verif bool
		apiFailure              string
		canaryReachable         bool
		canaryFailure           string
	}
	cases := []struct {
		name string
		args []string
		env  []string
		want want
	}{
		{"ready", []string{"--api-server", api, "--canary", closed}, nil,
			want{0, "ready", true, true, false, "", false, "refused"}},
		{"ready-verified", []string{"--api-server", api, "--canary", closed, "--ca-file", caFile}, nil,
			want{0, "ready", true, true, true, "", false, "refused"}},
		{"defaults-from-environment", nil, []string{
			"KUBERNETES_SERVICE_HOST=" + u.Hostname(), "KUBERNETES_SERVICE_PORT=" + u.Port(), "KEYLEDGER_PREFLIGHT_CANARY=" + closed},
			want{0, "ready", true, true, false, "", false, "refused"}},
		{"canary-reachable", []string{"--api-server", api, "--canary", listening}, nil,
			want{69, "not-ready", true, true, false, "", true, ""}},
		{"api-unreachable", []string{"--api-server", closed, "--canary", unusedLoopbackPort(t)}, nil,
			want{69, "not-ready", false, false, false, "refused", false, "refused"}},
		{"api-not-tls", []string{"--api-server", notTLS, "--canary", closed}, nil,
			want{69, "not-ready", false, false, false, "not-tls", false, "refused"}},
		{"api-wrong-ca", []string{"--api-server", api, "--canary", closed, "--ca-file", otherCA}, nil,
			want{69, "not-ready", false, false, false, "tls-verify-failed", false, "refused"}},
		// The control run (no policy) must find the canary reachable.
		{"control-canary-reachable", []string{"--api-server", api, "--canary", listening, "--expect-canary", "reachable"}, nil,
			want{0, "ready", true, true, false, "", true, ""}},
		{"control-canary-unreachable", []string{"--api-server", api, "--canary", closed, "--expect-canary", "reachable"}, nil,
			want{69, "not-ready", true, true, false, "", false, "refused"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := []suite.RunOption{suite.WithEnv("KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")}
			if tc.env != nil {
				opts = append(opts, suite.WithEnv(tc.env...))
			}
			// Cases that cannot converge fail at a short deadline.
			r := e.Keyledger(append([]string{"preflight", "--wait", "1s"}, tc.args...), opts...)
			require.Equal(t, tc.want.code, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
			require.Equal(t, 1, strings.Count(r.Stdout, "\n"), "exactly one line on stdout")
			out := suite.Outcome(t, r)
			require.Equal(t, tc.want.outcome, out["outcome"])
			require.Equal(t, tc.want.code == 0, out["ready"])
			apiRes := out["api"].(map[string]any)
			require.Equal(t, tc.want.apiOK, apiRes["ok"], "%v", apiRes)
			require.Equal(t, tc.want.handshake, apiRes["tlsHandshake"], "%v", apiRes)
			require.Equal(t, tc.want.verif, apiRes["verified"], "%v", apiRes)
			require.Equal(t, tc.want.apiFailure, stringOr(apiRes["failure"]), "%v", apiRes)
			canary := out["canary"].(map[string]any)
			require.Equal(t, tc.want.canaryReachable, canary["reachable"], "%v", canary)
			require.Equal(t, tc.want.canaryFailure, stringOr(canary["failure"]), "%v", canary)
		})
	}
}

// The gate keeps checking until the fence has converged: a canary that
// accepts the first connection and then goes away (as a pod's policy
// arrives about a second after the pod started) passes on the second round;
// a canary that stays reachable fails closed at the deadline after several
// rounds.
func TestIntegrationPreflightWaitsForTheFence(t *testing.T) {
	t.Parallel()
	e := setup(t)
	u, err := url.Parse(e.Kube.Host())
	require.NoError(t, err)

	converging, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() {
		c, err := converging.Accept()
		if err == nil {
			c.Close()
		}
		converging.Close() // the "policy" arrives after the first look
	}()
	r := e.Keyledger([]string{"preflight", "--api-server", u.Host, "--canary", converging.Addr().String(), "--wait", "60s"},
		suite.WithEnv("KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out := suite.Outcome(t, r)
	require.Equal(t, "ready", out["outcome"])
	require.EqualValues(t, 2, out["checks"], "ready on the second round, once the canary went away")

	r = e.Keyledger([]string{"preflight", "--api-server", u.Host, "--canary", loopbackListener(t, ""), "--wait", "2s"},
		suite.WithEnv("KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="))
	require.Equal(t, 69, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	out = suite.Outcome(t, r)
	require.Equal(t, "not-ready", out["outcome"])
	require.GreaterOrEqual(t, out["checks"], float64(2), "kept checking until the deadline")
	require.Contains(t, r.Stderr, `"wait":"2s"`)
}

func stringOr(v any) string {
	s, _ := v.(string)
	return s
}
