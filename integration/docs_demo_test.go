package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/platform"
)

// `make demo` on a clean clone of the committed tree passes through all
// three families: the demo program runs its own platform and fails on any
// step whose exit code is not the one it shows.
func TestIntegrationDemoOnCleanClone(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the real platform (run without -short)")
	}
	clone := filepath.Join(t.TempDir(), "keyledger")
	git := exec.CommandContext(t.Context(), "git", "clone", "--quiet", "--no-hardlinks", platform.RepoRoot(), clone)
	out, err := git.CombinedOutput()
	require.NoError(t, err, "git clone: %s", out)

	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	demo := exec.CommandContext(ctx, "go", "run", "./integration/demo")
	demo.Dir = clone
	demo.Env = append(os.Environ(), "TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1", "TESTCONTAINERS_RYUK_DISABLED=true")
	start := time.Now()
	b, err := demo.CombinedOutput()
	text := string(b)
	require.NoError(t, err, "demo failed:\n%s", text)
	t.Logf("demo took %s (timing is not a pass/fail criterion here)", time.Since(start).Round(time.Second))
	for _, want := range []string{
		"$ keyledger plan", "retire k-2026-07", "an exact replay writes nothing", "(exit 2)", "(exit 77)",
		"credentials: ServiceAccount", "nothing is written", "the missing Secret is created again",
		"SecretRestore of version 1", "$ keyledger history", "keyledger journal list",
		`"kind":"CredentialPlan"`, `"kind":"SecretUpdate"`, `"kind":"SecretRestore"`, `"kind":"KeyRetirement"`,
	} {
		require.Contains(t, text, want)
	}
	require.Equal(t, 0, strings.Count(text, "demo: "), "the demo reported no error")
}
