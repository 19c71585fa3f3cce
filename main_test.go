package keyledger

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started is
// still running after the last test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestEveryUnitPackageChecksForLeaks: every directory holding unit tests
// (all but integration/, whose platform keeps clients and containers
// running between tests) has a TestMain that calls goleak.VerifyTestMain.
func TestEveryUnitPackageChecksForLeaks(t *testing.T) {
	t.Parallel()
	tested, checked := map[string]bool{}, map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "integration" || strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		tested[dir] = true
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(src), "goleak.VerifyTestMain(m)") {
			checked[dir] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tested) < 10 {
		t.Fatalf("found tests in only %d directories: the walk is not at the repository root", len(tested))
	}
	for dir := range tested {
		if !checked[dir] {
			t.Errorf("%s has unit tests but no TestMain calling goleak.VerifyTestMain(m)", dir)
		}
	}
}
