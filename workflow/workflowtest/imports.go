package workflowtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// RequireOnlyTestsImport fails t for every non-test Go file under root,
// outside the package's own directory dir, that imports the package self:
// test support that no program may link.
func RequireOnlyTestsImport(t *testing.T, root, dir, self string) {
	t.Helper()
	root, err := filepath.Abs(root)
	require.NoError(t, err)
	own, err := filepath.Abs(dir)
	require.NoError(t, err)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.HasPrefix(path, own+string(filepath.Separator)) {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if strings.Trim(imp.Path.Value, `"`) == self {
				rel, _ := filepath.Rel(root, path) // named within the tree only
				t.Errorf("%s imports %s", rel, self)
			}
		}
		return nil
	})
	require.NoError(t, err)
}
