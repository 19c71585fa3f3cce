package tenant

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started is
// still running after the last test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
