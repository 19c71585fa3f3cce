package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
)

// `make release-binaries` (what `make release` builds before the image):
// static linux/amd64 and linux/arm64 binaries whose SHA256SUMS verify with
// sha256sum -c; the amd64 one says in `keyledger version` which commit it
// was built from; the arm64 one (it cannot run here) is what go version -m
// says (linux/arm64, static, trimmed) and carries the same commit.
func TestIntegrationRelease(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test: cross-compiles two binaries")
	}
	root := platform.RepoRoot()
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	commit := strings.TrimSpace(string(head))
	dist := t.TempDir()
	mk := exec.Command("make", "-s", "-C", root, "release-binaries", "DIST="+dist, "VERSION=v0.0.0-release-test")
	out, err := mk.CombinedOutput()
	require.NoError(t, err, "%s", out)

	entries, err := os.ReadDir(dist)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"SHA256SUMS", "keyledger-linux-amd64", "keyledger-linux-arm64"}, names)
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	require.NoError(t, err)
	require.Len(t, strings.Split(strings.TrimSpace(string(sums)), "\n"), 2, "%s", sums)
	check := exec.Command("sha256sum", "-c", "SHA256SUMS")
	check.Dir = dist
	out, err = check.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, 2, strings.Count(string(out), ": OK"), "%s", out)

	for _, arch := range []string{"amd64", "arm64"} {
		bin := filepath.Join(dist, "keyledger-linux-"+arch)
		info, err := exec.Command("go", "version", "-m", bin).Output()
		require.NoError(t, err)
		for _, want := range []string{"GOOS=linux", "GOARCH=" + arch, "CGO_ENABLED=0", "-trimpath=true"} {
			require.Contains(t, string(info), want, "%s build information", arch)
		}
		// -trimpath leaves -ldflags out of the build information: the
		// stamped commit is a string in the binary.
		b, err := os.ReadFile(bin)
		require.NoError(t, err)
		require.True(t, bytes.Contains(b, []byte(commit)), "%s carries the commit", arch)
	}

	raw, err := exec.Command(filepath.Join(dist, "keyledger-linux-amd64"), "version").Output()
	require.NoError(t, err)
	var v struct {
		Version, Commit, CommitTime, Platform string
		Modified                              *bool
	}
	require.NoError(t, json.Unmarshal(raw, &v), "%s", raw)
	require.Equal(t, "v0.0.0-release-test", v.Version)
	require.Equal(t, commit, v.Commit)
	require.Equal(t, "linux/amd64", v.Platform)
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, v.CommitTime)
	require.NotNil(t, v.Modified, "whether the tree was modified is said")
}
