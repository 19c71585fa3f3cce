package keyledger_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// module is the import path of this repository's packages.
const module = "github.com/keyledger/keyledger"

// sourceFile is one parsed non-test Go file of the repository.
type sourceFile struct {
	path string // slash-separated, from the repository root
	pkg  string // import path of its package
	ast  *ast.File
}

// sourceFiles parses every non-test Go file under roots.
func sourceFiles(t *testing.T, fset *token.FileSet, roots ...string) []sourceFile {
	t.Helper()
	var files []sourceFile
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			p = filepath.ToSlash(p)
			files = append(files, sourceFile{path: p, pkg: path.Join(module, path.Dir(p)), ast: f})
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, files, "no source under %v", roots)
	return files
}

// imports maps the names f refers to its imports by to their paths.
func imports(f *ast.File) map[string]string {
	names := map[string]string{}
	for _, spec := range f.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		name := path.Base(p)
		if spec.Name != nil {
			name = spec.Name.Name
		}
		names[name] = p
	}
	return names
}

// untypedConstants are the package-level constants declared without a
// type in files, as "<import path>.<name>": the words a comparison with
// one of them compares as plain text.
func untypedConstants(files []sourceFile) map[string]bool {
	untyped := map[string]bool{}
	for _, f := range files {
		for _, decl := range f.ast.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			var typed bool // an implicit repetition keeps the previous spec's type
			for _, spec := range gen.Specs {
				v := spec.(*ast.ValueSpec)
				if v.Type != nil || len(v.Values) > 0 {
					typed = v.Type != nil
				}
				for _, name := range v.Names {
					if !typed {
						untyped[f.pkg+"."+name.Name] = true
					}
				}
			}
		}
	}
	return untyped
}

// plainText says why e, compared with a record's status, is plain text
// ("" when it is not): a string literal, a conversion to string, or a
// constant declared without a type.
func plainText(f sourceFile, names map[string]string, untyped map[string]bool, e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			return "the string " + e.Value
		}
	case *ast.CallExpr:
		if fn, ok := e.Fun.(*ast.Ident); ok && fn.Name == "string" {
			return "a conversion to string"
		}
	case *ast.Ident:
		if untyped[f.pkg+"."+e.Name] {
			return "the untyped constant " + e.Name
		}
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && untyped[names[x.Name]+"."+e.Sel.Name] {
			return "the untyped constant " + x.Name + "." + e.Sel.Name
		}
	case *ast.ParenExpr:
		return plainText(f, names, untyped, e.X)
	}
	return ""
}

// isStatus says whether e reads a status field (x.Status).
func isStatus(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Status"
}

// statusComparisons lists the comparisons of a status field (==, != and
// switch cases) with plain text in files, as "<file>:<line>: <why>".
func statusComparisons(fset *token.FileSet, files []sourceFile, untyped map[string]bool) []string {
	var found []string
	for _, f := range files {
		names := imports(f.ast)
		flag := func(at token.Pos, other ast.Expr) {
			if why := plainText(f, names, untyped, other); why != "" {
				found = append(found, fmt.Sprintf("%s:%d: a status compared with %s", f.path, fset.Position(at).Line, why))
			}
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op != token.EQL && n.Op != token.NEQ {
					break
				}
				if isStatus(n.X) {
					flag(n.Pos(), n.Y)
				}
				if isStatus(n.Y) {
					flag(n.Pos(), n.X)
				}
			case *ast.SwitchStmt:
				if n.Tag == nil || !isStatus(n.Tag) {
					break
				}
				for _, c := range n.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						flag(e.Pos(), e)
					}
				}
			}
			return true
		})
	}
	return found
}

// No family or engine code compares a record's status as text: a status
// is a store.Status, and every word it is compared with is a constant of
// that type (workflow.Applied, workflow.Ours, credentials' statusPresent,
// ...), so a misspelt or foreign word does not compile.
func TestStatusesAreComparedTyped(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files := sourceFiles(t, fset, "workflow")
	untyped := untypedConstants(append(files, sourceFiles(t, fset, "store")...))
	require.Empty(t, statusComparisons(fset, files, untyped))
}

// The check above finds each form of a comparison with text.
func TestStatusComparisonsFound(t *testing.T) {
	t.Parallel()
	const src = `package p

import "github.com/keyledger/keyledger/workflow"

const word = "absent"

const typed Status = "present"

func f(r record) {
	_ = r.Status == "applied"
	_ = r.Status != string(workflow.Ours)
	_ = word == r.Status
	_ = r.Status == workflow.Loose
	_ = r.Status == typed
	_ = r.Status == workflow.Applied
	switch r.Status {
	case "gone", typed:
	}
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "workflow/p/p.go", src, 0)
	require.NoError(t, err)
	file := sourceFile{path: "workflow/p/p.go", pkg: module + "/workflow/p", ast: f}
	untyped := untypedConstants([]sourceFile{file})
	untyped[module+"/workflow.Loose"] = true
	require.Equal(t, []string{
		`workflow/p/p.go:10: a status compared with the string "applied"`,
		`workflow/p/p.go:11: a status compared with a conversion to string`,
		`workflow/p/p.go:12: a status compared with the untyped constant word`,
		`workflow/p/p.go:13: a status compared with the untyped constant workflow.Loose`,
		`workflow/p/p.go:17: a status compared with the string "gone"`,
	}, statusComparisons(fset, []sourceFile{file}, untyped))
}

// targetParses lists the places in files that parse a journaled target
// themselves: a call of store.ParseTarget, or of a Record's TargetIn.
func targetParses(fset *token.FileSet, files []sourceFile) []string {
	var found []string
	for _, f := range files {
		names := imports(f.ast)
		ast.Inspect(f.ast, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, isIdent := sel.X.(*ast.Ident)
			switch {
			case sel.Sel.Name == "ParseTarget" && isIdent && names[x.Name] == module+"/store",
				sel.Sel.Name == "TargetIn":
				found = append(found, fmt.Sprintf("%s:%d: %s", f.path, fset.Position(call.Pos()).Line, sel.Sel.Name))
			}
			return true
		})
	}
	return found
}

// A record's target is parsed in one place, when the journal is read
// (package store): no code outside store parses a journaled target, every
// family reads Record.Target, a store.Target in the operation's namespace.
func TestTargetsAreParsedInStoreOnly(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	var outside []sourceFile
	for _, f := range sourceFiles(t, fset, ".") {
		if !strings.HasPrefix(f.path, "store/") {
			outside = append(outside, f)
		}
	}
	require.Empty(t, targetParses(fset, outside))
}

// The check above finds both ways of parsing a target outside store.
func TestTargetParsesFound(t *testing.T) {
	t.Parallel()
	const src = `package p

import kstore "github.com/keyledger/keyledger/store"

func f(r kstore.Record) {
	_, _ = kstore.ParseTarget("ns", "secret/x")
	_, _ = r.TargetIn("ns")
	_ = r.Target.Name
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "workflow/p/p.go", src, 0)
	require.NoError(t, err)
	file := sourceFile{path: "workflow/p/p.go", pkg: module + "/workflow/p", ast: f}
	require.Equal(t, []string{"workflow/p/p.go:6: ParseTarget", "workflow/p/p.go:7: TargetIn"}, targetParses(fset, []sourceFile{file}))
}
