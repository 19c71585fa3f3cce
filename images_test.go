package keyledger_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger"
	"github.com/keyledger/keyledger/cmd/keyledger/app"
)

// shippedKustomizations are the deploy/ directories a user builds.
var shippedKustomizations = []string{"base", "versioned", "control", "overlays/cloudnativepg",
	"overlays/cloudnativepg-versioned", "journal", "journal/grant", "journal/inspect"}

// imageFindings lists every container image of the Jobs in yamlDocs (a
// kustomize build's output) that is not want.
func imageFindings(t *testing.T, where string, yamlDocs []byte, want string) (findings []string, images int) {
	t.Helper()
	for _, doc := range bytes.Split(yamlDocs, []byte("\n---\n")) {
		var head struct{ Kind string }
		require.NoError(t, yaml.Unmarshal(doc, &head))
		if head.Kind != "Job" {
			continue
		}
		var j batchv1.Job
		require.NoError(t, yaml.Unmarshal(doc, &j))
		for _, c := range append(j.Spec.Template.Spec.InitContainers, j.Spec.Template.Spec.Containers...) {
			images++
			if c.Image != want {
				findings = append(findings, where+": Job "+j.Name+" container "+c.Name+" runs "+c.Image)
			}
		}
	}
	return findings, images
}

// One image reference everywhere: every Job a deploy/ kustomization
// builds, the hook `render credentials` writes by default, `make image`,
// `make release` and hack/image.sh all name KEYLEDGER_IMAGE of versions.env.
func TestEveryImageReferenceIsTheVersionsTables(t *testing.T) {
	t.Parallel()
	want := keyledger.Image()
	require.NotEmpty(t, want)
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	total := 0
	for _, dir := range shippedKustomizations {
		rm, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join("deploy", dir))
		require.NoError(t, err, dir)
		out, err := rm.AsYaml()
		require.NoError(t, err, dir)
		findings, n := imageFindings(t, "deploy/"+dir, out, want)
		require.Empty(t, findings)
		total += n
	}
	require.GreaterOrEqual(t, total, 7, "the Jobs' containers were found")

	plan := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(plan, []byte(`{"apiVersion":"keyledger.dev/v1","kind":"CredentialPlan",
 "metadata":{"requestId":"r1","mutationId":"m1"},"spec":{"owner":"o","namespace":"shop",
 "secrets":[{"name":"s","keys":[{"name":"password","generate":{"length":32,"alphabet":"alphanumeric"}}]}]}}`), 0o600))
	var out, errOut bytes.Buffer
	require.NoError(t, app.Run(context.Background(), []string{"render", "credentials", "--plan", plan}, app.IOStreams{Out: &out, ErrOut: &errOut}))
	findings, n := imageFindings(t, "render credentials", out.Bytes(), want)
	require.Empty(t, findings)
	require.Equal(t, 1, n)

	makefile, err := os.ReadFile("Makefile")
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(makefile), "IMAGE=$(KEYLEDGER_IMAGE)"), "make image and make release tag KEYLEDGER_IMAGE")
	require.NotRegexp(t, regexp.MustCompile(`IMAGE=[^$\s]`), string(makefile), "no other image reference in the Makefile")
	script, err := os.ReadFile(filepath.Join("hack", "image.sh"))
	require.NoError(t, err)
	require.Contains(t, string(script), "image=${IMAGE:-$KEYLEDGER_IMAGE}")
}

// The check can fail: a Job that runs another reference is a finding.
func TestImageFindingsCatchADifferentReference(t *testing.T) {
	t.Parallel()
	doc := []byte("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: keyledger:dev\n")
	findings, n := imageFindings(t, "test", doc, "keyledger:0.1.0")
	require.Equal(t, 1, n)
	require.Len(t, findings, 1)
}
