package keyledger

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// integrationSubjects are the prefixes integration/README.md names; every
// file of the package starts with one of them.
var integrationSubjects = []string{
	"retire", "credentials", "versioned", "journal", "engine", "kube", "output",
	"cli", "deploy", "docs", "node", "operators", "soak", "bench",
}

// integrationTests lists the Test functions of integration/, by file: the
// suite's tests, not TestMain and not the bench (make bench runs those).
func integrationTests(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("integration", "*.go"))
	require.NoError(t, err)
	tests := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			if name := fn.Name.Name; name != "TestMain" && !strings.HasPrefix(name, "TestBench") {
				tests[name] = filepath.Base(f)
			}
		}
	}
	return tests
}

func TestSuiteReadmeNamesEveryTest(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("integration", "README.md"))
	require.NoError(t, err)
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`(Test[A-Za-z0-9_]+)`").FindAllStringSubmatch(string(b), -1) {
		named[m[1]] = true
	}
	tests := integrationTests(t)
	require.NotEmpty(t, tests)
	for name, file := range tests {
		require.True(t, named[name], "%s (%s) is not named in integration/README.md", name, file)
	}
	for name := range named {
		_, ok := tests[name]
		require.True(t, ok, "integration/README.md names %s, which integration/ does not have", name)
	}
}

// TestNodeCloudNativePGRunsFirst: the node tests share one node and, once
// any of them starts it, one stand-in journal in the namespace the real
// CloudNativePG Cluster needs free; go test runs a package's tests in file
// order, so the CloudNativePG test's file must sort first among the node
// tests' (a node test in a file before it fails it: "keyledger-journal
// already exists").
func TestNodeCloudNativePGRunsFirst(t *testing.T) {
	t.Parallel()
	tests := integrationTests(t)
	first := ""
	for _, file := range tests {
		if strings.HasPrefix(file, "node_") && (first == "" || file < first) {
			first = file
		}
	}
	require.Equal(t, "node_cloudnativepg_test.go", first, "the first node test's file")
}

func TestSuiteFilesNamedBySubject(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("integration", "*.go"))
	require.NoError(t, err)
	shared := []string{"doc.go", "main_test.go", "helpers_test.go"}
	pattern := regexp.MustCompile(`^(` + strings.Join(integrationSubjects, "|") + `)(_[a-z0-9]+)*_test\.go$`)
	// Names of past work say nothing to the next engineer.
	past := regexp.MustCompile(`(^|_)(issue|hardening|proof|year|round|fix|new|misc)(_|$)|_[0-9]+(_|$)`)
	for _, f := range files {
		name := filepath.Base(f)
		if slices.Contains(shared, name) {
			continue
		}
		require.Regexp(t, pattern, name, "integration/%s: start with a subject of integration/README.md", name)
		require.NotRegexp(t, past, strings.TrimSuffix(name, "_test.go"), "integration/%s is named after past work, not its subject", name)
	}
}
