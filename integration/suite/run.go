package suite

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// Run runs a test package's tests on the shared platform and stops what
// they started (the control plane, PostgreSQL, the node, the External
// Secrets controller); after a failed run the node keeps its evidence.
// TestMain calls it: os.Exit(suite.Run(m)).
func Run(m *testing.M) int {
	code := m.Run()
	StopNodePlatform(code != 0)
	StopESOPlatform(code != 0)
	if shared.kube != nil {
		if err := shared.kube.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		}
	}
	if shared.pg != nil {
		if err := shared.pg.Terminate(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "stopping PostgreSQL:", err)
		}
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	return code
}
