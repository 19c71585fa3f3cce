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
// test file of integration/ and every file of its shared harness
// integration/suite starts with one of them (the bench is integration/bench).
var integrationSubjects = []string{
	"retire", "credentials", "versioned", "journal", "engine", "kube", "output",
	"cli", "deploy", "docs", "node", "operators", "soak",
}

// testFuncs lists the Test functions (not TestMain) of the Go files in dir,
// by name, with their file.
func testFuncs(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	tests := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			tests[fn.Name.Name] = filepath.Base(f)
		}
	}
	return tests
}

// integrationTests lists the Test functions of integration/, by file: the
// suite's tests (the bench is integration/bench; make bench runs it).
func integrationTests(t *testing.T) map[string]string {
	t.Helper()
	return testFuncs(t, "integration")
}

// TestBenchInItsOwnPackage: every benchmark (TestBench*) is in
// integration/bench and everything there is a benchmark, so `make bench`
// runs all of them and the suite none.
func TestBenchInItsOwnPackage(t *testing.T) {
	t.Parallel()
	for name, file := range integrationTests(t) {
		require.False(t, strings.HasPrefix(name, "TestBench"), "integration/%s: %s belongs in integration/bench", file, name)
	}
	bench := testFuncs(t, filepath.Join("integration", "bench"))
	require.NotEmpty(t, bench)
	for name, file := range bench {
		require.True(t, strings.HasPrefix(name, "TestBench"), "integration/bench/%s: %s is not a benchmark (TestBench*)", file, name)
	}
	// The harness holds no tests: it is a package the tests import.
	require.Empty(t, testFuncs(t, filepath.Join("integration", "suite")))
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
	subjects := strings.Join(integrationSubjects, "|")
	// Names of past work say nothing to the next engineer.
	past := regexp.MustCompile(`(^|_)(issue|hardening|proof|year|round|fix|new|misc)(_|$)|_[0-9]+(_|$)`)
	for _, c := range []struct {
		dir     string
		shared  []string
		pattern *regexp.Regexp
	}{
		{"integration", []string{"doc.go", "main_test.go"}, regexp.MustCompile(`^(` + subjects + `)(_[a-z0-9]+)*_test\.go$`)},
		{filepath.Join("integration", "bench"), []string{"main_test.go"}, regexp.MustCompile(`^bench(_[a-z0-9]+)*_test\.go$`)},
		// The shared harness: the platform and a test's environment (env.go,
		// run.go), then one file per subject; no test files.
		{filepath.Join("integration", "suite"), []string{"doc.go", "env.go", "run.go", "bench.go"}, regexp.MustCompile(`^(` + subjects + `)(_[a-z0-9]+)*\.go$`)},
	} {
		files, err := filepath.Glob(filepath.Join(c.dir, "*.go"))
		require.NoError(t, err)
		require.NotEmpty(t, files, c.dir)
		for _, f := range files {
			name := filepath.Base(f)
			if slices.Contains(c.shared, name) {
				continue
			}
			require.Regexp(t, c.pattern, name, "%s/%s: start with a subject of integration/README.md", c.dir, name)
			require.NotRegexp(t, past, strings.TrimSuffix(strings.TrimSuffix(name, ".go"), "_test"), "%s/%s is named after past work, not its subject", c.dir, name)
		}
	}
}
