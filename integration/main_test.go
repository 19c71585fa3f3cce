package integration

import (
	"flag"
	"os"
	"testing"

	"github.com/keyledger/keyledger/integration/suite"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(suite.Run(m))
}

// env and nodeEnv are the shared harness (package suite); the aliases keep
// the tests' helpers short.
type (
	env     = suite.Env
	nodeEnv = suite.NodeEnv
)

func setup(t *testing.T) *env { t.Helper(); return suite.Setup(t) }

func setupNode(t *testing.T) *nodeEnv { t.Helper(); return suite.SetupNode(t) }
