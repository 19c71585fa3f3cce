package app

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// keyledgerNames reads the Go code (non-test files of the packages the
// binary is built from) for the keyledger.dev/ names it writes: every
// string literal with that prefix, and, among them, the constants named
// Annotation... or Label... .
func keyledgerNames(t *testing.T) (all, annotationsAndLabels map[string]string) {
	t.Helper()
	all, annotationsAndLabels = map[string]string{}, map[string]string{}
	root := filepath.Join("..", "..", "..")
	for _, dir := range []string{"workflow", "kube", "store", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BasicLit:
					if v, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && strings.HasPrefix(v, "keyledger.dev/") {
						all[v] = path
					}
				case *ast.ValueSpec:
					for i, name := range n.Names {
						if i >= len(n.Values) || !(strings.HasPrefix(name.Name, "Annotation") || strings.HasPrefix(name.Name, "Label")) {
							continue
						}
						if lit, ok := n.Values[i].(*ast.BasicLit); ok {
							if v, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(v, "keyledger.dev/") {
								annotationsAndLabels[v] = name.Name
							}
						}
					}
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, annotationsAndLabels)
	return all, annotationsAndLabels
}

// docs/contract.md maps the seeds' words to keyledger's: every
// keyledger.dev/ name it shows is one the code writes, every annotation and
// label constant of the code is on the page, and its hook table is what
// render writes, in order.
func TestContractNamesExist(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "contract.md"))
	require.NoError(t, err)
	page := string(b)
	all, constants := keyledgerNames(t)
	shown := map[string]bool{}
	for _, m := range regexp.MustCompile("`(keyledger\\.dev/[^` ]+)`").FindAllStringSubmatch(page, -1) {
		shown[m[1]] = true
		_, exists := all[m[1]]
		require.True(t, exists, "docs/contract.md names %s, which the code does not write", m[1])
	}
	for name, constant := range constants {
		require.True(t, shown[name], "docs/contract.md leaves out %s (%s)", name, constant)
	}

	_, hook, ok := strings.Cut(page, "## ADR-072's hook")
	require.True(t, ok)
	count := regexp.MustCompile(`writes the ([0-9]+) below`).FindStringSubmatch(hook)
	require.NotNil(t, count)
	require.Equal(t, strconv.Itoa(len(hookKinds)), count[1])
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^\| [0-9]+ \| ([A-Za-z]+) \|`).FindAllStringSubmatch(hook, -1) {
		listed = append(listed, m[1])
	}
	require.Equal(t, hookKinds, listed, "the hook table is what render writes, in order")
}
