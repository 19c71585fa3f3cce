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
		back, err := ParseTarget(ns, tc.text)
		if err != nil || back != tc.target {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", tc.text, back, err, tc.target)
		}
	}
	for _, bad := range []string{"secret", "secret/", "/x"} {
		if _, err := ParseTarget("shop", bad); err == nil {
			t.Errorf("ParseTarget(%q) accepted", bad)
		}
	}
}
