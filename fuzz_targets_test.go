package keyledger

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMakeFuzzPatternsNameOneTarget: go test refuses -fuzz when its pattern
// matches more than one fuzz test of the package (FuzzParse also matched
// FuzzParsePaths), so every line of `make fuzz` must match exactly one.
func TestMakeFuzzPatternsNameOneTarget(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("Makefile")
	require.NoError(t, err)
	lines := regexp.MustCompile(`test \./(\S+)/ -run '\^\$\$' -fuzz '?([^' ]+?)'? `).FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, lines, "make fuzz runs no target")
	target := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	for _, l := range lines {
		dir, pattern := l[1], regexp.MustCompile(regexp.MustCompile(`\$\$`).ReplaceAllString(l[2], `$$`))
		files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		require.NoError(t, err)
		var matched []string
		for _, f := range files {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range target.FindAllStringSubmatch(string(src), -1) {
				if pattern.MatchString(m[1]) {
					matched = append(matched, m[1])
				}
			}
		}
		require.Len(t, matched, 1, "make fuzz: -fuzz %q in ./%s matches %v", l[2], dir, matched)
	}
}
