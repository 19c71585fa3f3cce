//go:build failpoints

package app

import (
	"net/http"
	"os"

	"github.com/keyledger/keyledger/kube/fault"
)

// faultWrap arms the fault-injecting transport from KEYLEDGER_FAULT. Only
// test builds (-tags failpoints) contain it. checkFault has validated the
// setting before.
func faultWrap(rt http.RoundTripper) http.RoundTripper {
	spec := os.Getenv(fault.Env)
	if spec == "" {
		return rt
	}
	rule, err := fault.Parse(spec)
	if err != nil {
		panic(err)
	}
	return fault.New(rule, rt)
}

// checkFault validates KEYLEDGER_FAULT before anything is contacted.
func checkFault() error {
	if spec := os.Getenv(fault.Env); spec != "" {
		if _, err := fault.Parse(spec); err != nil {
			return usagef("%s: %v", fault.Env, err)
		}
	}
	return nil
}
