package workflow

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFamiliesNeverAskForTheDryRun: the dry run is a wrapper around the
// engine and the families, so no family's code (its non-test files, and
// its subpackages') names the dry run: no workflow.DryRun... identifier, no
// Dry... method for it to call, and no "planned" status of its own. A family reads the
// effect of its calls through Verify and reaches servers through Reach.
func TestFamiliesNeverAskForTheDryRun(t *testing.T) {
	t.Parallel()
	var found []string
	for _, family := range []string{"retire", "versioned", "credentials"} {
		err := filepath.WalkDir(family, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(file, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "workflow" && (strings.Contains(n.Sel.Name, "DryRun") || strings.Contains(n.Sel.Name, "Planned")) {
						found = append(found, path+": workflow."+n.Sel.Name)
					}
				case *ast.FuncDecl: // a method the dry run would call
					if strings.HasPrefix(n.Name.Name, "Dry") {
						found = append(found, path+": func "+n.Name.Name)
					}
				case *ast.KeyValueExpr: // Status: "planned"
					if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Status" && isPlanned(n.Value) {
						found = append(found, path+": a planned status")
					}
				case *ast.BinaryExpr: // x == "planned"
					if isPlanned(n.X) || isPlanned(n.Y) {
						found = append(found, path+": a comparison with the planned status")
					}
				case *ast.CaseClause: // case "planned":
					for _, e := range n.List {
						if isPlanned(e) {
							found = append(found, path+": a case of the planned status")
						}
					}
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	require.Empty(t, found, "family code that asks whether it is in a dry run")
}

func isPlanned(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return false
	}
	v, err := strconv.Unquote(lit.Value)
	return err == nil && v == string(statusPlanned)
}
