// Package platform starts the real parts keyledger's integration tests run
// against: a Kubernetes control plane (kube-apiserver, etcd and
// kube-controller-manager built from the Go module proxy, started through
// envtest) and a PostgreSQL server in a locally built container image.
package platform

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// RepoRoot is the directory holding go.mod and versions.env.
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("platform: cannot locate source file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	versionsOnce sync.Once
	versions     map[string]string
	versionsErr  error
)

// Version returns one entry of versions.env, the project's single versions
// table (for example "KUBERNETES_VERSION").
func Version(key string) (string, error) {
	versionsOnce.Do(func() { versions, versionsErr = readVersions(filepath.Join(RepoRoot(), "versions.env")) })
	if versionsErr != nil {
		return "", versionsErr
	}
	v, ok := versions[key]
	if !ok || v == "" {
		return "", fmt.Errorf("versions.env has no %s", key)
	}
	return v, nil
}

func readVersions(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading versions table: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want KEY=VALUE", path, n)
		}
		out[k] = v
	}
	return out, sc.Err()
}
