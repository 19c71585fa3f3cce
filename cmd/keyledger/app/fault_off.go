//go:build !failpoints

package app

import "net/http"

// faultWrap is the identity in release builds: KEYLEDGER_FAULT is ignored.
func faultWrap(rt http.RoundTripper) http.RoundTripper { return rt }

// checkFault has nothing to check in release builds.
func checkFault() error { return nil }
