package kube

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// A call that gets no answer (nothing listens; the server accepts and cuts;
// the server accepts and never answers) fails with keyledger's words: the
// operation, the reason class and the timeout flag, never the API server's
// address or the request path.
func TestNoAnswerErrorsNameNoAddress(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusedAddr := closed.Addr().String()
	require.NoError(t, closed.Close())

	cut := listen(t, func(c net.Conn) { _ = c.Close() })
	hang := listen(t, func(c net.Conn) { t.Cleanup(func() { _ = c.Close() }) })

	cases := []struct {
		name, addr, class string
		timeout           bool
	}{
		{"refused", refusedAddr, LostRefused, false},
		{"cut", cut, LostReset, false},
		{"hang", hang, LostTimeout, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, err := NewClient(&rest.Config{Host: "https://" + tc.addr, BearerToken: "t",
				Timeout: time.Second, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
			require.NoError(t, err)
			_, port, _ := net.SplitHostPort(tc.addr)
			noAddress := func(msg string) {
				t.Helper()
				for _, canary := range []string{"127.0.0.1", port, "/api", "canary-namespace", "canary-secret", "https"} {
					require.NotContains(t, msg, canary)
				}
			}
			// A write (sent once): the class and the flag as they happened.
			_, err = CheckRules(context.Background(), client, Rights{Namespace: "canary-namespace"})
			require.ErrorIs(t, err, ReasonLost)
			require.Equal(t, tc.timeout, Classify(err).Timeout, "%v", err)
			want := "kubernetes post selfsubjectrulesreviews: no answer (" + tc.class + ")"
			if tc.timeout {
				want += ", timeout"
			}
			require.Equal(t, "rules review in canary-namespace: "+want, err.Error())
			// A read through an adapter (client-go retries a cut read until
			// the request's deadline): no address either.
			_, err = NewSecretReplacer(client, "canary-namespace", "canary-secret").Get(context.Background())
			require.ErrorIs(t, err, ReasonLost)
			require.Regexp(t, `^kubernetes (get secrets|request): no answer \(`, err.Error())
			noAddress(err.Error())
			_, err = CheckAccess(context.Background(), client, []AccessCheck{SecretCheck("get", "ns", "x", false)})
			require.ErrorIs(t, err, ReasonLost)
			require.NotContains(t, err.Error(), port)
		})
	}
}

// listen accepts connections on loopback and hands each to serve.
func listen(t *testing.T, serve func(net.Conn)) string {
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

// An answer's status message keeps what the API server said, with any URL
// or address a webhook failure quotes replaced.
func TestStatusMessagesLoseAddresses(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`secrets "s" is forbidden: User "u" cannot get resource "secrets"`:                                                                             `secrets "s" is forbidden: User "u" cannot get resource "secrets"`,
		`Internal error occurred: failed calling webhook "w": Post "https://hook.ns.svc:443/validate?timeout=10s": dial tcp 10.1.2.3:443: i/o timeout`: `Internal error occurred: failed calling webhook "w": Post "(address)": dial tcp (address): i/o timeout`,
		`proxy to [fd00::1]:6443 failed`: `proxy to (address) failed`,
	} {
		require.Equal(t, want, scrubAddresses(in))
	}
}
