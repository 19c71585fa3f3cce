package platform

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

// TestMain runs the package's tests, then stops the shared platform parts
// they started (one control plane, one database server, ...) so that no
// process outlives the run.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := runTeardowns(); err != nil {
		fmt.Fprintln(os.Stderr, "platform teardown:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

var (
	teardownMu sync.Mutex
	teardowns  []func() error
)

// registerTeardown adds fn to what TestMain runs after all tests, in reverse
// order of registration. Shared fixtures (sharedKube) register their Stop.
func registerTeardown(fn func() error) {
	teardownMu.Lock()
	defer teardownMu.Unlock()
	teardowns = append(teardowns, fn)
}

func runTeardowns() error {
	teardownMu.Lock()
	defer teardownMu.Unlock()
	var errs []error
	for i := len(teardowns) - 1; i >= 0; i-- {
		if err := teardowns[i](); err != nil {
			errs = append(errs, err)
		}
	}
	teardowns = nil
	return errors.Join(errs...)
}
