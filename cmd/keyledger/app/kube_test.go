package app

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A kubeconfig that is missing, unreadable or malformed is the operator's
// to fix: exit 64 with reason invalid-kubeconfig and a message naming the
// cause, never the file. An API server that does not answer stays 69.
func TestKubeconfigProblemsAreUsageErrors(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	dir := filepath.Join(t.TempDir(), "kc-canary-7f3a")
	require.NoError(t, os.Mkdir(dir, 0o700))
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	// A port on loopback that refuses connections: listen, then close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	unreachable := write("unreachable-canary", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://`+closed+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: canary-token-7f3a}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`)
	cases := []struct {
		name, kubeconfig string
		code             int
		reason, cause    string
	}{
		{"missing", filepath.Join(dir, "absent-canary"), ExitUsage, ReasonInvalidKubeconfig, "the kubeconfig file does not exist"},
		{"malformed", write("garbage-canary", "{{{ this is not yaml"), ExitUsage, ReasonInvalidKubeconfig, "malformed"},
		{"not-a-kubeconfig", write("list-canary", "[1, 2, 3]"), ExitUsage, ReasonInvalidKubeconfig, "malformed"},
		{"directory", dir, ExitUsage, ReasonInvalidKubeconfig, "could not be read"},
		{"unreachable-server", unreachable, ExitUnavailable, "kubernetes-connection-refused", "kubernetes unavailable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := Run(context.Background(), []string{"keyring", "inspect", "shop/ring", "--kubeconfig", tc.kubeconfig}, IOStreams{Out: &out, ErrOut: &errOut})
			require.Equal(t, tc.code, ExitCode(err), "%v", err)
			line := errOut.String()
			require.Contains(t, line, "["+tc.reason+", exit ")
			require.Contains(t, line, tc.cause)
			require.NotContains(t, line, "could not be loaded")
			require.NotContains(t, line, "canary", "no path, no token: %s", line)
			require.NotContains(t, line, dir)
			require.Empty(t, out.String())
		})
	}
}
