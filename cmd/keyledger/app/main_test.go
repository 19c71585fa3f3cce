package app

import (
	"context"
	"os"
	"testing"
)

// asBinaryEnv makes the test binary run as keyledger (Run on its
// arguments, exit with ExitCode): the completion script a test sources
// calls `keyledger __complete ...`, and a link named keyledger to the test
// binary answers it without building the command.
const asBinaryEnv = "KEYLEDGER_APP_TEST_AS_BINARY"

func TestMain(m *testing.M) {
	if os.Getenv(asBinaryEnv) == "1" {
		os.Exit(ExitCode(Run(context.Background(), os.Args[1:], StdStreams())))
	}
	os.Exit(m.Run())
}
