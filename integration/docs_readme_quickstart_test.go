package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
)

// readmeBlocks are the README's sh code blocks, in order.
func readmeBlocks(t *testing.T) (readme string, blocks []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(platform.RepoRoot(), "README.md"))
	require.NoError(t, err)
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		blocks = append(blocks, m[1])
	}
	return string(b), blocks
}

// The README is for users: at most about 250 lines, its ten-minute try is
// `make demo` (which TestIntegrationDemoOnCleanClone runs on a clean
// clone), and its quick start on one's own cluster runs: every line of it,
// in a shell, against this test's API server and PostgreSQL. Two things
// stand in for what the test cannot take from a user's machine: the two
// URLs of the block's first lines are this test's journal database, and
// `make build` links the binary the harness built (what the Makefile's
// build target writes, bin/keyledger); psql, when it is not installed, is
// replaced by running its one statement as the owner.
func TestIntegrationReadmeQuickStart(t *testing.T) {
	readme, blocks := readmeBlocks(t)
	require.LessOrEqual(t, strings.Count(readme, "\n"), 250, "the README is at most about 250 lines")
	require.GreaterOrEqual(t, len(blocks), 2)
	require.Equal(t, "make demo", strings.TrimSpace(blocks[0]), "the ten-minute try")
	makefile, err := os.ReadFile(filepath.Join(platform.RepoRoot(), "Makefile"))
	require.NoError(t, err)
	require.Contains(t, string(makefile), "\t$(GO) run ./integration/demo\n", "make demo runs the demo TestIntegrationDemoOnCleanClone runs")
	require.Contains(t, string(makefile), "-o bin/keyledger ./cmd/keyledger", "make build writes bin/keyledger")
	require.Contains(t, readme, "make test", "the README's other command")

	var quick string
	for _, b := range blocks {
		if strings.Contains(b, "bin/keyledger migrate up") {
			quick = b
		}
	}
	require.NotEmpty(t, quick, "the README has a quick start on one's own cluster")
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl is not installed: the README's quick start on one's own cluster needs it")
	}
	e := setup(t)
	ctx := t.Context()

	// The journal: a fresh database whose owner is this server's admin; the
	// role the block creates is the server's, so it is dropped afterwards.
	owner := suite.FreshDatabase(t)
	password := regexp.MustCompile(`CREATE ROLE keyledger_ai LOGIN PASSWORD '([^']*)'`).FindStringSubmatch(quick)
	require.NotNil(t, password, "the block creates the namespace's role")
	ai, err := suite.Postgres().URLFor(owner, "keyledger_ai", password[1])
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if conn, err := pgx.Connect(cctx, owner); err == nil {
			_, _ = conn.Exec(cctx, "DROP OWNED BY keyledger_ai")
			_, _ = conn.Exec(cctx, "DROP ROLE IF EXISTS keyledger_ai")
			_ = conn.Close(cctx)
		}
		_ = e.Kube.Client().CoreV1().Namespaces().Delete(cctx, "ai", metav1.DeleteOptions{})
	})

	var script []string
	for _, line := range strings.Split(strings.TrimSpace(quick), "\n") {
		switch {
		case strings.HasPrefix(line, "OWNER_URL="):
			line = "OWNER_URL='" + owner + "'"
		case strings.HasPrefix(line, "AI_URL="):
			line = "AI_URL='" + ai + "'"
		case strings.HasPrefix(line, "psql "):
			if _, err := exec.LookPath("psql"); err != nil {
				sql := regexp.MustCompile(`-c "([^"]*)"`).FindStringSubmatch(line)
				require.NotNil(t, sql, line)
				_, err := suite.Connect(t, owner).Exec(ctx, sql[1])
				require.NoError(t, err, line)
				line = "# " + line
			}
		}
		script = append(script, line)
	}
	dir := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(platform.RepoRoot(), "examples"), filepath.Join(dir, "examples")))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	admin, err := os.ReadFile(e.Kube.KubeconfigFile())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(kubeconfig, admin, 0o600))

	shell := "set -euo pipefail\n" +
		"make() { [ \"$*\" = build ] && mkdir -p bin && ln -sf \"$KEYLEDGER_TEST_BINARY\" bin/keyledger; }\n" +
		strings.Join(script, "\n") + "\n"
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "bash", "--norc", "--noprofile", "-c", shell)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "KUBECONFIG=" + kubeconfig, "KEYLEDGER_TEST_BINARY=" + suite.Binary()}
	out, err := cmd.CombinedOutput()
	text := string(out)
	require.NoError(t, err, "the README's quick start failed:\n%s", text)
	for _, want := range []string{`"outcome":"completed"`, `"outcome":"existing"`, `"retirementId":"ret-k-2026-07"`, "valid: KeyRetirement"} {
		require.Contains(t, text, want)
	}
	require.NotContains(t, text, "Xjwmg4lAZyyAGrQ", "no key material in any output")
	require.Regexp(t, `(?m)^ai-keyring-retire-k-2026-07\s+-\s+KeyRetirement\s+ai/prompt-output-keyring\s+completed\s+completed`, text, "journal list")
}
