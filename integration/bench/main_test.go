package bench

import (
	"os"
	"testing"

	"github.com/keyledger/keyledger/integration/suite"
)

// The benchmarks run on the integration tests' platform (package suite),
// started on first use and stopped here.
func TestMain(m *testing.M) {
	os.Exit(suite.Run(m))
}
