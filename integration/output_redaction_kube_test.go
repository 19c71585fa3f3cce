package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/suite"
)

// An unreachable API server (nothing listens on its loopback port; it
// accepts and cuts; it accepts and never answers): the run exits 69 and
// neither stdout nor stderr carries the server's host:port or a request
// path, nor does keyring inspect's error line.
func TestIntegrationUnreachableAPIServerNamesNoAddress(t *testing.T) {
	t.Parallel()
	e := setup(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := closed.Addr().String()
	require.NoError(t, closed.Close())
	cases := map[string]string{
		"refused": refused,
		"cut":     acceptThen(t, func(c net.Conn) { _ = c.Close() }),
		"hang":    acceptThen(t, func(c net.Conn) { t.Cleanup(func() { _ = c.Close() }) }),
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keyring-unreachable", Namespace: e.NS, UID: "8f0c7a4e-1b2d-4c3e-9f5a-6b7c8d9e0f1a"}}
	path := e.WriteCommand("retire-unreachable.json", suite.RetireCommand(s, "k-2026-07", "mut-unreachable"))
	for name, addr := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
			require.NoError(t, os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: not-a-real-token}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: %s}}]
current-context: x
`, addr, e.NS)), 0o600))
			_, port, _ := net.SplitHostPort(addr)
			noAddress := func(r suite.Result) {
				t.Helper()
				out := r.Stdout + r.Stderr
				for _, canary := range []string{addr, ":" + port, "127.0.0.1", "/apis/", "/api/", "https://"} {
					require.NotContains(t, out, canary, "stdout %q stderr %q", r.Stdout, r.Stderr)
				}
			}
			r := e.Keyledger([]string{"run", path}, suite.AsKubeconfig(kubeconfig))
			require.Equal(t, 69, r.Code, "%s %s", r.Stdout, r.Stderr)
			require.Equal(t, "unavailable", suite.Outcome(t, r)["outcome"])
			require.Contains(t, r.Stdout, "no answer (", "the words say what kind of failure")
			noAddress(r)
			r = e.Keyledger([]string{"keyring", "inspect", e.NS + "/" + s.Name}, suite.AsKubeconfig(kubeconfig))
			require.NotEqual(t, 0, r.Code)
			require.True(t, strings.Contains(r.Stderr, "no answer ("), "%s", r.Stderr)
			noAddress(r)
		})
	}
}

// acceptThen accepts connections on loopback and hands each to serve.
func acceptThen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			serve(c)
		}
	}()
	return l.Addr().String()
}
