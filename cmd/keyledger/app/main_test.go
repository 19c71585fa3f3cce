package app

import (
	"context"
	"os"
	"testing"

	"go.uber.org/goleak"
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
	// The tests fail when a goroutine they started still runs after the last.
	goleak.VerifyTestMain(m)
}
