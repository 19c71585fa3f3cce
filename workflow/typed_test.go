package workflow_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// TestContractIsTyped: nothing that crosses between the engine and a
// family (the Family contract, what a run and a dry run report, the
// journal's records) carries an untyped payload (any, map[string]any):
// a family writes and reads its records as typed values (store.Detail).
func TestContractIsTyped(t *testing.T) {
	if got := workflowtest.Untyped(workflow.Decision{}, workflow.Completion{}, workflow.Refusal{}, workflow.Call{},
		workflow.Answer{}, workflow.Verdict{}, workflow.Run{}, workflow.Result{}, workflow.DryRunResult{},
		workflow.Plan{}, store.Record{}, store.PrepareParams{}, store.TransitionParams{}); len(got) > 0 {
		t.Errorf("untyped payload in the engine's contract:\n%s", strings.Join(got, "\n"))
	}
}

// TestNoUntypedStructField: no struct type declared in the engine, the
// journal or a family (non-test code) has a field of an untyped type (any,
// interface{}, or a map or slice of them): every record detail and summary
// is a struct with JSON tags, the journal's schema.
func TestNoUntypedStructField(t *testing.T) {
	for _, dir := range []string{".", "../store", "retire", "credentials", "versioned"} {
		fset := token.NewFileSet()
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				spec, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				ast.Inspect(spec.Type, func(n ast.Node) bool {
					st, ok := n.(*ast.StructType)
					if !ok {
						return true
					}
					for _, field := range st.Fields.List {
						where := f.Name.Name + "." + spec.Name.Name
						if len(field.Names) > 0 {
							where += "." + field.Names[0].Name
						}
						if untypedExpr(field.Type) && notJournaled[where] == "" {
							t.Errorf("%s: %s is of untyped type %s", fset.Position(field.Pos()), where, types.ExprString(field.Type))
						}
					}
					return true
				})
				return false
			})
		}
	}
}

// notJournaled are the struct fields of an untyped type that never reach
// the journal or the engine, each with why.
var notJournaled = map[string]string{
	"credentials.patchOp.Value": "an RFC 6902 operation's value, sent to the API server in a patch, never journaled",
}

// untypedExpr reports whether a type expression mentions any or interface{}.
func untypedExpr(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.Ident:
			found = found || x.Name == "any"
		case *ast.InterfaceType:
			found = found || len(x.Methods.List) == 0
		case *ast.FuncType:
			return false // a func's parameters are no payload
		}
		return true
	})
	return found
}
