package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// notLinked are the packages the keyledger binary must not link: client-go's
// clientset (its scheme registers every API group at start; its typed
// clients, its fake), discovery and the apply configurations they pull in,
// and kubefake, the tests' adapter over a clientset. Each costs start time
// (package init, pages of a larger binary) in every run; kube.NewClient is
// the binary's client (issue 23).
var notLinked = []string{
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/discovery",
	"k8s.io/client-go/applyconfigurations",
	"k8s.io/client-go/gentype",
	"k8s.io/client-go/testing",
	"github.com/keyledger/keyledger/kube/kubefake",
}

// TestBinaryLinksNoClientset: `go list -deps` of this command, with and
// without the failpoints tag, holds none of notLinked (nor a package under
// one).
func TestBinaryLinksNoClientset(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	for _, tags := range []string{"", "failpoints"} {
		out, err := exec.CommandContext(t.Context(), "go", "list", "-tags", tags, "-deps", ".").Output()
		require.NoError(t, err, "go list -tags %q -deps", tags)
		deps := strings.Fields(string(out))
		require.Contains(t, deps, "k8s.io/client-go/rest", "the list is the binary's dependencies")
		for _, dep := range deps {
			for _, bad := range notLinked {
				if dep == bad || strings.HasPrefix(dep, bad+"/") {
					t.Errorf("tags %q: the binary links %s", tags, dep)
				}
			}
		}
	}
}
