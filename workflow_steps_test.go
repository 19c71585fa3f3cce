package keyledger

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// familyDirs are the three families, each deciding through workflow.RunSteps.
var familyDirs = []string{"workflow/retire", "workflow/credentials", "workflow/versioned"}

// judging are the verbs of a step that writes and reads nothing of its own
// and judges what the steps before it found.
var judging = regexp.MustCompile(`^(check|need|expect|bind|confirm)[A-Z]`)

// familySource is what the step-name test reads of one family: the
// journal's words for its steps (the values of its step constants), the
// names in its step lists, and the length of its Decide.
type familySource struct {
	words        map[string]bool
	steps        []string
	decideLines  int
	usesRunSteps bool
}

func readFamily(t *testing.T, dir string) familySource {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	src := familySource{words: map[string]bool{}}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				src.addWords(n)
			case *ast.CompositeLit:
				if isStepList(n.Type) {
					for _, e := range n.Elts {
						src.steps = append(src.steps, stepName(e))
					}
				}
			case *ast.FuncDecl:
				if n.Name.Name == "Decide" && n.Recv != nil {
					src.decideLines = fset.Position(n.End()).Line - fset.Position(n.Pos()).Line + 1
				}
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "workflow" && n.Sel.Name == "RunSteps" {
					src.usesRunSteps = true
				}
			}
			return true
		})
	}
	return src
}

// addWords keeps the values of constants named step... or Step...: the
// journal's words.
func (s *familySource) addWords(v *ast.ValueSpec) {
	for i, name := range v.Names {
		if !regexp.MustCompile(`^[sS]tep[A-Z]`).MatchString(name.Name) || i >= len(v.Values) {
			continue
		}
		if lit, ok := v.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			w, err := strconv.Unquote(lit.Value)
			if err == nil {
				s.words[w] = true
			}
		}
	}
}

// isStepList: a []workflow.Step[...] or []step literal.
func isStepList(e ast.Expr) bool {
	a, ok := e.(*ast.ArrayType)
	if !ok {
		return false
	}
	switch elt := a.Elt.(type) {
	case *ast.Ident:
		return elt.Name == "step"
	case *ast.IndexExpr:
		sel, ok := elt.X.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "Step"
	}
	return false
}

// stepName is the function a step list names: f.name, name, or a wrapper's
// one argument.
func stepName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.CallExpr:
		if len(e.Args) == 1 {
			return stepName(e.Args[0])
		}
	}
	return "?"
}

// kebab turns readLive into read-live.
func kebab(name string) string {
	return strings.ToLower(regexp.MustCompile(`([a-z0-9])([A-Z])`).ReplaceAllString(name, "$1-$2"))
}

// TestFamiliesShareOneStepRunner: each family decides through
// workflow.RunSteps in a short Decide, and every step of its lists is named
// with the journal's word for what it reads or writes, or judges (check...,
// need..., expect..., bind..., confirm...).
func TestFamiliesShareOneStepRunner(t *testing.T) {
	t.Parallel()
	for _, dir := range familyDirs {
		src := readFamily(t, dir)
		require.True(t, src.usesRunSteps, "%s decides without workflow.RunSteps", dir)
		require.NotEmpty(t, src.steps, "%s has no step list", dir)
		require.NotEmpty(t, src.words, "%s has no step constants (the journal's words)", dir)
		require.Positive(t, src.decideLines, "%s has no Decide", dir)
		require.LessOrEqual(t, src.decideLines, 15, "%s: Decide is %d lines; the steps decide", dir, src.decideLines)
		for _, name := range src.steps {
			require.True(t, src.words[kebab(name)] || judging.MatchString(name),
				"%s: step %s is neither a journal word of the family (%s) nor a check", dir, name, kebab(name))
		}
	}
}
