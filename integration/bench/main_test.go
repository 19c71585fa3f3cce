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

// env and nodeEnv are the shared harness (package suite).
type (
	env     = suite.Env
	nodeEnv = suite.NodeEnv
)

func setup(t *testing.T) *env { t.Helper(); return suite.Setup(t) }

func setupNode(t *testing.T) *nodeEnv { t.Helper(); return suite.SetupNode(t) }
