package store

import "testing"

// A target's text is what the journal has always held, and it parses back
// to the same value (the namespace is the operation's).
func TestTargetText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		target Target
		text   string
	}{
		{SecretTarget("shop", "orders-keyring"), "secret/orders-keyring"},
		{Target{Kind: TargetPod, Namespace: "shop", Name: "shop-app-0"}, "pod/shop-app-0"},
		{Target{Kind: TargetPassword, Namespace: "shop", Name: "shop-app-password"}, "password/shop-app-password"},
		{Target{Kind: TargetExternalSecret, Namespace: "shop", Name: "shop-app"}, "externalsecret/shop-app"},
		{Target{Kind: TargetSecrets, Namespace: "shop", Name: "1"}, "secrets/1"},
		{Target{}, ""},
	} {
		if got := tc.target.String(); got != tc.text {
			t.Errorf("%+v is %q, want %q", tc.target, got, tc.text)
		}
		ns := tc.target.Namespace
		back, err := parseTarget(ns, tc.text)
		if err != nil || back != tc.target {
			t.Errorf("parseTarget(%q) = %+v, %v; want %+v", tc.text, back, err, tc.target)
		}
	}
	for _, bad := range []string{"secret", "secret/", "/x"} {
		if _, err := parseTarget("shop", bad); err == nil {
			t.Errorf("parseTarget(%q) accepted", bad)
		}
	}
}

// A target the journal would not read back is refused before it is
// journaled; one it reads back comes back in the operation's namespace.
func TestTargetJournaled(t *testing.T) {
	t.Parallel()
	for _, bad := range []Target{{Kind: TargetSecret, Namespace: "shop"}, {Name: "x"}, {Kind: "secret/pod", Name: "x"}, {Namespace: "shop"}} {
		if back, err := bad.Journaled("shop"); err == nil {
			t.Errorf("%+v journaled as %+v", bad, back)
		}
	}
	for _, tc := range []struct{ target, back Target }{
		{SecretTarget("", "x"), SecretTarget("shop", "x")},
		{SecretTarget("other", "x"), SecretTarget("shop", "x")},
		{Target{Kind: TargetPod, Namespace: "shop", Name: "a/b"}, Target{Kind: TargetPod, Namespace: "shop", Name: "a/b"}},
		{Target{}, Target{}},
	} {
		if back, err := tc.target.Journaled("shop"); err != nil || back != tc.back {
			t.Errorf("%+v journaled as %+v, %v; want %+v", tc.target, back, err, tc.back)
		}
	}
}
