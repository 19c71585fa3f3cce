package platform

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// An orphaned control-plane process (its test process died) is killed by the
// next start; one whose parent lives is left alone.
func TestIntegrationKubeReapsOrphans(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the control-plane binaries")
	}
	dir, err := runControlPlaneScript(t.Context(), io.Discard)
	require.NoError(t, err)
	etcd := filepath.Join(dir, "etcd")
	run := func(name string) []string {
		client, err := freePort()
		require.NoError(t, err)
		peer, err := freePort()
		require.NoError(t, err)
		return []string{etcd, "--name", name, "--data-dir", t.TempDir(),
			"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", client), "--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", client),
			"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer), "--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
			"--initial-cluster", fmt.Sprintf("%s=http://127.0.0.1:%d", name, peer)}
	}
	// The orphan: started by a shell that exits at once, so init adopts it.
	args := run("orphan")
	orphanOut, err := exec.Command("sh", append([]string{"-c", `"$@" >/dev/null 2>&1 & echo $!`, "sh"}, args...)...).Output()
	require.NoError(t, err)
	orphan, err := strconv.Atoi(strings.TrimSpace(string(orphanOut)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(orphan, syscall.SIGKILL) })
	// A child of this live test process.
	liveArgs := run("live")
	live := exec.Command(liveArgs[0], liveArgs[1:]...)
	require.NoError(t, live.Start())
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })

	require.Eventually(t, func() bool { return parentPID(orphan) == 1 }, 10*time.Second, 20*time.Millisecond, "the orphan is adopted by init")
	killed := reapOrphanedControlPlanes(etcd)
	require.Contains(t, killed, orphan)
	require.NotContains(t, killed, live.Process.Pid)
	require.NoError(t, live.Process.Signal(syscall.Signal(0)), "the live child still runs")
}
