package keyledger_test

import (
	"go/ast"
	"go/token"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxFuncLines is the longest a function of workflow/ or store/ may be.
const maxFuncLines = 60

// longFuncs are the functions of workflow/ and store/ still over
// maxFuncLines, each to be split; the list only shrinks (a function on it
// marked true that is no longer too long fails the test until it is taken
// off; false marks one being rewritten elsewhere).
var longFuncs = map[string]bool{
	"store/migrate.go MigrateWith":                        true,
	"workflow/command/decode.go typed":                    true,
	"workflow/credentials/ensure.go createSecret":         true,
	"workflow/credentials/family.go observe":              true,
	"workflow/credentials/hook.go Hook":                   true,
	"workflow/credentials/repair.go repairOne":            true,
	"workflow/credentials/replay.go Asks":                 true,
	"workflow/credentials/spec.go validate":               true,
	"workflow/retire/keyring/retire.go Retire":            true,
	"workflow/retire/keyring/validate.go validateMembers": true,
	"workflow/versioned/history.go ReadHistory":           true,
	"workflow/versioned/resolve.go resolveReplace":        true,
	"workflow/versioned/resolve.go resolveSnapshot":       true,
	"workflow/versioned/spec.go decodeUpdate":             true,
	"workflow/workflowtest/journal.go PrepareRun":         true,
}

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
	for name, n := range long {
		_, known := longFuncs[name]
		require.True(t, known, "%s is %d lines, over %d", name, n, maxFuncLines)
	}
	for name, shrinks := range longFuncs {
		if shrinks {
			require.Contains(t, long, name, "%s is short now: take it off longFuncs", name)
		}
	}
}
