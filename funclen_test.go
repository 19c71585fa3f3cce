package keyledger_test

import (
	"go/ast"
	"go/token"
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
	for _, f := range sourceFiles(t, fset, "workflow", "store") {
		for _, decl := range f.ast.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				long[f.path+" "+fn.Name.Name] = n
			}
		}
	}
	require.Empty(t, long, "functions over %d lines (file function: lines)", maxFuncLines)
}
