package platform

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// The k8s.io libraries in go.mod and the control-plane binaries are one
// Kubernetes version, written once in versions.env.
func TestVersionsPinOneKubernetes(t *testing.T) {
	t.Parallel()
	k8s, err := Version("KUBERNETES_VERSION")
	require.NoError(t, err)
	gomod, err := os.ReadFile(filepath.Join(RepoRoot(), "go.mod"))
	require.NoError(t, err)
	libs := regexp.MustCompile(`(?m)^\s*(k8s\.io/(?:api|apimachinery|client-go))\s+(v\S+)`).FindAllStringSubmatch(string(gomod), -1)
	require.Len(t, libs, 3, "go.mod requires k8s.io/api, apimachinery and client-go")
	for _, m := range libs {
		require.Equal(t, "v0."+k8s[2:], m[2], "%s must match KUBERNETES_VERSION %s", m[1], k8s)
	}
	for _, key := range []string{"ETCD_VERSION", "POSTGRES_DEBIAN_SUITE", "POSTGRES_MAJOR"} {
		_, err := Version(key)
		require.NoError(t, err)
	}
}
