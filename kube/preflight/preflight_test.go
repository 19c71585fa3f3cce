package preflight

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// Validate decides without the network; defaults are filled in.
func TestValidate(t *testing.T) {
	t.Parallel()
	ok := func() Options { return Options{APIServer: "10.96.0.1:443", Canary: "192.0.2.10:5432"} }
	o := ok()
	require.NoError(t, o.Validate())
	require.Equal(t, CanaryUnreachable, o.Expect)
	require.Equal(t, DefaultAPITimeout, o.APITimeout)
	require.Equal(t, DefaultCanaryTimeout, o.CanaryTimeout)

	cases := map[string]func(o *Options){
		"api-empty":         func(o *Options) { o.APIServer = "" },
		"api-no-port":       func(o *Options) { o.APIServer = "10.96.0.1" },
		"api-port-zero":     func(o *Options) { o.APIServer = "10.96.0.1:0" },
		"canary-name":       func(o *Options) { o.Canary = "postgres.example:5432" },
		"canary-no-port":    func(o *Options) { o.Canary = "192.0.2.10" },
		"canary-port-zero":  func(o *Options) { o.Canary = "192.0.2.10:0" },
		"expect-unknown":    func(o *Options) { o.Expect = "sometimes" },
		"negative-timeout":  func(o *Options) { o.CanaryTimeout = -1 },
		"canary-empty":      func(o *Options) { o.Canary = "" },
		"api-bracketed-bad": func(o *Options) { o.APIServer = "[fd00::1:443" },
	}
	for name, mutate := range cases {
		o := ok()
		mutate(&o)
		require.Error(t, o.Validate(), name)
	}
	v6 := Options{APIServer: "[fd00::1]:443", Canary: "[fd00::2]:80", Expect: CanaryReachable}
	require.NoError(t, v6.Validate())
}

// A fence that lands between a round's two checks (here: the API server's
// accept closes both listeners, as a NetworkPolicy applied at that moment
// would close both paths) does not make the round ready: the canary is
// checked first, found reachable, and the round fails. Checked the other
// way round (API first), the same round reached the API server before the
// fence and the canary after it, and passed.
func TestCheckFenceBetweenChecksIsNotReady(t *testing.T) {
	t.Parallel()
	canary, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer canary.Close()
	go func() {
		for {
			c, err := canary.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	api := httptest.NewUnstartedServer(http.NotFoundHandler())
	api.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew { // the fence lands
			_ = canary.Close()
			_ = api.Listener.Close()
		}
	}
	api.StartTLS()
	defer api.Close()
	r, err := Check(t.Context(), Options{APIServer: api.Listener.Addr().String(), Canary: canary.Addr().String()})
	require.NoError(t, err)
	require.False(t, r.Ready, "%+v", r)
	require.True(t, r.Canary.Reachable, "the canary, checked first, was open")
}
