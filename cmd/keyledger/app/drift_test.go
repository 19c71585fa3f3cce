package app

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/migrations"
	"github.com/keyledger/keyledger/workflow/credentials"
)

// render credentials' help says what it writes: as many objects as it
// writes, of the kinds it writes, in its order (hookKinds, which apply-hook
// reads too), in its Short (the usage), its Long and its flags.
func TestRenderHelpSaysWhatItWrites(t *testing.T) {
	t.Parallel()
	out, err := render(t, "--image", "img")
	require.NoError(t, err)
	var written []string
	for _, doc := range strings.Split(out, "\n---\n") {
		var tm struct{ Kind string }
		require.NoError(t, yaml.Unmarshal([]byte(doc), &tm))
		written = append(written, tm.Kind)
	}
	require.Equal(t, append(append([]string{}, hookKinds...), "ConfigMap"), written, "render writes hookKinds, in order, then the sync marker")
	require.Len(t, credentials.HookFiles, len(hookKinds), "one file per hook object with --out-dir")

	var help bytes.Buffer
	require.NoError(t, Run(context.Background(), []string{"render", "credentials", "--help"}, IOStreams{Out: &help, ErrOut: &bytes.Buffer{}}))
	text := strings.Join(strings.Fields(help.String()), " ")
	hooks := written[:len(hookKinds)]
	require.Contains(t, text, fmt.Sprintf("print a credential plan's %d Argo CD PreSync hook objects (%s) and a ConfigMap naming the hook Job", len(hooks), strings.Join(hooks, ", ")))
	require.Contains(t, text, fmt.Sprintf("Print the %d Argo CD PreSync hook objects (%s) and a ConfigMap naming the hook Job", len(hooks), strings.Join(hooks, ", ")))
	require.Contains(t, text, fmt.Sprintf("write the %d objects as files here", len(written)))
	for _, n := range []string{"one", "two", "three", "four", "five", "six", "seven", "eight"} {
		require.NotRegexp(t, `(?i)\b`+n+` (Argo CD |PreSync |hook )*objects`, text, "a number in words that could drift")
	}
}

// latestMigration is the newest embedded migration's version.
func latestMigration(t *testing.T) int {
	t.Helper()
	entries, err := fs.ReadDir(migrations.FS, ".")
	require.NoError(t, err)
	latest := 0
	for _, e := range entries {
		n, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		require.NoError(t, err, e.Name())
		latest = max(latest, n)
	}
	require.Positive(t, latest)
	return latest
}

// Every document that shows what migrate up prints ({"version":N,...},
// deploy/README.md's migration Job log) shows the newest migration's
// version, read from the migrations the binary embeds.
func TestDocumentedMigrationVersionIsTheLatest(t *testing.T) {
	t.Parallel()
	latest := latestMigration(t)
	shown := regexp.MustCompile(`\{"version":([0-9]+),"dirty":`)
	root := filepath.Join("..", "..", "..")
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range shown.FindAllSubmatch(b, -1) {
			found++
			require.Equal(t, strconv.Itoa(latest), string(m[1]), "%s shows migrate up ending at version %s; the newest migration is %d", path, m[1], latest)
		}
		return nil
	})
	require.NoError(t, err)
	require.Positive(t, found, "deploy/README.md shows the migration Job's log")
}
