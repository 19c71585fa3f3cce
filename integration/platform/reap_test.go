package platform

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A container left behind by a dead test process is removed by the next
// start; one owned by a live process is kept.
func TestIntegrationPostgresReapsOrphans(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs Docker")
	}
	if os.Getenv(DatabaseURLEnv) != "" {
		t.Skip("external database: no containers")
	}
	ctx := t.Context()
	_, err := runHackScript(ctx, "docker.sh")
	require.NoError(t, err)
	image, err := runHackScript(ctx, "postgres-image.sh")
	require.NoError(t, err)

	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	deadPID := dead.Process.Pid

	create := func(pid int) string {
		out, err := exec.CommandContext(ctx, "docker", "create", "--label", ownerLabel+"="+strconv.Itoa(pid), image).Output()
		require.NoError(t, err)
		id := strings.TrimSpace(string(out))
		t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })
		return id
	}
	orphan, live := create(deadPID), create(os.Getpid())
	reapOrphans(context.Background())
	require.Error(t, exec.CommandContext(ctx, "docker", "inspect", orphan).Run(), "the orphan is removed")
	require.NoError(t, exec.CommandContext(ctx, "docker", "inspect", live).Run(), "a live owner's container stays")
}
