package preflight

import (
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
