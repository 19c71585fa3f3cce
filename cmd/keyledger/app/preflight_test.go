package app

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// The API server address defaults to what client-go's in-cluster config
// uses, IPv6 included.
func TestPreflightDefaultAPIServer(t *testing.T) {
	cases := []struct{ host, port, want string }{
		{"10.96.0.1", "443", "10.96.0.1:443"},
		{"fd00::1", "443", "[fd00::1]:443"},
		{"", "443", ""},
		{"10.96.0.1", "", ""},
	}
	for _, tc := range cases {
		t.Setenv("KUBERNETES_SERVICE_HOST", tc.host)
		t.Setenv("KUBERNETES_SERVICE_PORT", tc.port)
		require.Equal(t, tc.want, defaultAPIServer(), "%+v", tc)
	}
}

// Wrong preflight invocations exit 64 without touching the network: the
// addresses below are never dialled.
func TestPreflightUsageErrors(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv(EnvPreflightCanary, "")
	api := "--api-server=127.0.0.1:1"
	cases := map[string][]string{
		"no-api-server":         {"preflight", "--canary=127.0.0.1:2"},
		"no-canary":             {"preflight", api},
		"canary-hostname":       {"preflight", api, "--canary=canary.example:80"},
		"canary-port-zero":      {"preflight", api, "--canary=127.0.0.1:0"},
		"canary-no-port":        {"preflight", api, "--canary=127.0.0.1"},
		"api-port-out-of-range": {"preflight", "--api-server=127.0.0.1:70000", "--canary=127.0.0.1:2"},
		"bad-expectation":       {"preflight", api, "--canary=127.0.0.1:2", "--expect-canary=maybe"},
		"negative-timeout":      {"preflight", api, "--canary=127.0.0.1:2", "--canary-timeout=-1s"},
		"positional":            {"preflight", api, "--canary=127.0.0.1:2", "extra"},
		"missing-ca-file":       {"preflight", api, "--canary=127.0.0.1:2", "--ca-file=/nonexistent/ca.crt"},
	}
	for name, args := range cases {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), args, IOStreams{Out: &out, ErrOut: &errOut})
		require.Equal(t, ExitUsage, ExitCode(err), "%s: %v", name, err)
		require.Empty(t, out.String(), "%s: no outcome line for a usage error", name)
	}
}
