package app

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// render --image takes a tag or a digest reference; the hook Job's name
// hashes the whole reference, so a new digest under the same tag is a new
// Job (Argo CD runs it), and the Job runs exactly the reference given.
func TestRenderImageByDigest(t *testing.T) {
	t.Parallel()
	digest := func(c string) string { return "registry.example/keyledger@sha256:" + strings.Repeat(c, 64) }
	names := map[string]string{}
	for _, image := range []string{digest("a"), digest("b"), "registry.example/keyledger:0.1.0@sha256:" + strings.Repeat("a", 64), "registry.example/keyledger:0.1.0"} {
		out, err := render(t, "--image", image)
		require.NoError(t, err, image)
		job, _ := renderedHookJob(t, out)
		require.Equal(t, image, job.Spec.Template.Spec.Containers[0].Image)
		require.NotContains(t, names, job.Name, "%s has the name of %s", image, names[job.Name])
		names[job.Name] = image
	}
	for _, bad := range []string{"registry.example/keyledger@sha256:abc", "registry.example/keyledger@md5:" + strings.Repeat("a", 32),
		"@sha256:" + strings.Repeat("a", 64), "keyledger @sha256:" + strings.Repeat("a", 64)} {
		_, err := render(t, "--image", bad)
		require.Equal(t, ExitUsage, ExitCode(err), bad)
	}
}
