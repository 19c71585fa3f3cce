package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/integration/suite"
)

// expectedRun is what examples/README.md says `keyledger run` of one
// example does: its outcome word and exit code.
type expectedRun struct {
	outcome string
	code    int
}

// exampleRow is one row of examples/README.md's table: the file, and the
// outcome and exit code in its last column.
var exampleRow = regexp.MustCompile("(?m)^\\| \\[`([^`]+)`\\]\\([^)]*\\) \\|.*\\| `([a-z-]+)` \\(exit ([0-9]+)\\) \\|$")

// examplesExpected reads the table of examples/README.md.
func examplesExpected(t *testing.T) map[string]expectedRun {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(platform.RepoRoot(), "examples", "README.md"))
	require.NoError(t, err)
	out := map[string]expectedRun{}
	for _, m := range exampleRow.FindAllStringSubmatch(string(b), -1) {
		code, err := strconv.Atoi(m[3])
		require.NoError(t, err)
		out[m[1]] = expectedRun{outcome: m[2], code: code}
	}
	files, err := filepath.Glob(filepath.Join(platform.RepoRoot(), "examples", "*.json"))
	require.NoError(t, err)
	require.Len(t, out, len(files), "examples/README.md says what run does for every command file: %v", out)
	for _, f := range files {
		require.Contains(t, out, filepath.Base(f))
	}
	return out
}

// example reads one example command file.
func example(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(platform.RepoRoot(), "examples", name))
	require.NoError(t, err)
	var cmd map[string]any
	require.NoError(t, json.Unmarshal(b, &cmd))
	return cmd
}

// requireExpected checks a run against what examples/README.md says.
func requireExpected(t *testing.T, name string, want expectedRun, r suite.Result) map[string]any {
	t.Helper()
	require.Equal(t, want.code, r.Code, "%s: stdout %s stderr %s", name, r.Stdout, r.Stderr)
	out := suite.Outcome(t, r)
	require.Equal(t, want.outcome, out["outcome"], "%s: stdout %s", name, r.Stdout)
	return out
}

// Every example, with its placeholders filled in from the cluster as
// examples/README.md says, does what the README's table says when run
// against the demo platform (this test's namespace stands for the
// examples' ai and shop), and passes keyledger validate as it is in the
// checkout.
func TestIntegrationCLIExamples(t *testing.T) {
	t.Parallel()
	e := setup(t)
	suite.InstallExternalSecretsCRDs(t)
	want := examplesExpected(t)
	for name := range want {
		r := e.Keyledger([]string{"validate", filepath.Join(platform.RepoRoot(), "examples", name)})
		require.Equal(t, 0, r.Code, "validate %s: %s", name, r.Stderr)
	}

	// The keyring Secret, created as its comments say (kubectl create -f).
	b, err := os.ReadFile(filepath.Join(platform.RepoRoot(), "examples", "keyring-secret.yaml"))
	require.NoError(t, err)
	var secret corev1.Secret
	require.NoError(t, yaml.UnmarshalStrict(b, &secret))
	secret.Namespace = ""
	keyringSecret := e.CreateSecret(&secret)
	r := e.Keyledger([]string{"keyring", "inspect", e.NS + "/" + keyringSecret.Name})
	require.Equal(t, 0, r.Code, "keyring inspect: %s", r.Stderr)
	retirement := example(t, "key-retirement.json")
	spec := retirement["spec"].(map[string]any)
	require.Contains(t, r.Stdout, spec["expectedMaterialDigest"], "the example names the digest keyring inspect prints")
	spec["namespace"], spec["expectedUID"] = e.NS, string(keyringSecret.UID)
	requireExpected(t, "key-retirement.json", want["key-retirement.json"], e.RunCmd(retirement, e.AsRetirerOf(keyringSecret)))
	r = e.Keyledger([]string{"keyring", "inspect", e.NS + "/" + keyringSecret.Name})
	require.Equal(t, 0, r.Code)
	require.Contains(t, r.Stdout, `"retirementId":"`+spec["retirementId"].(string)+`"`, "the receipt")

	for _, name := range []string{"credential-plan.json", "credential-plan-servers.json"} {
		plan := example(t, name)
		plan["spec"].(map[string]any)["namespace"] = e.NS
		as := e.AsCredentialRunner(plan)
		path := e.WriteCommand(name, plan)
		// plan predicts the authorship the run then reports: every Secret
		// it would create is proven.
		p := e.Keyledger([]string{"plan", "-o", "json", path}, as)
		require.Equal(t, 0, p.Code, "plan %s: %s", name, p.Stderr)
		var predicted struct {
			Summary struct {
				Authorship map[string]string `json:"authorship"`
			} `json:"summary"`
		}
		require.NoError(t, json.Unmarshal([]byte(p.Stdout), &predicted), p.Stdout)
		out := requireExpected(t, name, want[name], e.Keyledger([]string{"run", path}, as))
		ran := map[string]string{}
		for k, v := range out["authorship"].(map[string]any) {
			ran[k] = v.(string)
			require.Equal(t, "proven", v, "%s: %s was created by this run", name, k)
		}
		require.Equal(t, predicted.Summary.Authorship, ran, "%s: plan predicts the run's authorship", name)
	}

	// The live Secret the versioned examples write, with the key the update
	// removes.
	live := e.CreateSecret(suite.PlainSecret("db", map[string][]byte{"password": suite.VCanary("old"), "old-password": suite.VCanary("older")}))
	as := e.AsWriter("db")
	for _, name := range []string{"secret-update.json", "secret-restore.json", "secret-delete.json"} {
		cmd := example(t, name)
		spec := cmd["spec"].(map[string]any)
		spec["namespace"], spec["expectedResourceVersion"] = e.NS, live.ResourceVersion
		requireExpected(t, name, want[name], e.RunCmd(cmd, as))
		if name != "secret-delete.json" {
			live = e.GetSecret("db")
		}
	}
	_, err = e.Kube.Client().CoreV1().Secrets(e.NS).Get(t.Context(), "db", metav1.GetOptions{})
	require.Error(t, err, "the delete example deleted the Secret")
}
