package keyledger_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxFuncLines is the longest a function of workflow/ or store/ may be.
const maxFuncLines = 60

// No function of the engine's packages (workflow/, store/) is longer than
// maxFuncLines, tests aside: the engine reads as small named steps.
func TestFunctionsAreShort(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	long := map[string]int{}
	for _, root := range []string{"workflow", "store"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
					long[filepath.ToSlash(path)+" "+fn.Name.Name] = n
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.Empty(t, long, "functions over %d lines (file function: lines)", maxFuncLines)
}
