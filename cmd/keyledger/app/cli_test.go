package app

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// invocation is one run of keyledger in the test process.
type invocation struct {
	stdout, stderr string
	code           int
}

func invoke(args ...string) invocation {
	var out, errOut bytes.Buffer
	err := Run(context.Background(), args, IOStreams{Out: &out, ErrOut: &errOut})
	return invocation{stdout: out.String(), stderr: errOut.String(), code: ExitCode(err)}
}

// volatile are the parts of a log line that differ between two runs of
// the same invocation: the time and the measurements.
var volatile = regexp.MustCompile(`"time":"[^"]*",|"(duration_ms|peak_rss_kib|rss_anon_kib|rss_file_kib)":[0-9]+`)

func (i invocation) normalized() invocation {
	i.stderr = volatile.ReplaceAllString(i.stderr, "")
	return i
}

// hermeticCommands gives every command of the tree arguments that run it
// without a cluster or a database it could reach: each fails (or
// succeeds) before any network, or at a loopback port nothing listens on.
func hermeticCommands(t *testing.T) map[string][]string {
	t.Helper()
	dir := t.TempDir()
	retirement := writeCommand(t, "retire.json", validRetirement())
	plan := writeCommand(t, "plan.json", renderPlan)
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.Mkdir(empty, 0o700))
	return map[string][]string{
		"run":                {retirement},
		"plan":               {retirement},
		"validate":           {retirement},
		"schema":             {"KeyRetirement"},
		"explain":            {"KeyRetirement.spec"},
		"migrate":            {"version"},
		"journal list":       {},
		"journal show":       {"mut-1"},
		"journal prune":      {"--older-than", "1h"},
		"journal grant":      {"kl_a", "ns-a"},
		"journal revoke":     {"kl_a", "ns-a"},
		"journal grants":     {},
		"journal onboard":    {"ns-a", "--dry-run"},
		"journal rotate":     {"ns-a", "--dry-run"},
		"journal offboard":   {"ns-a", "--dry-run"},
		"keyring inspect":    {"ai/keyring"},
		"history":            {"shop/db"},
		"render credentials": {"--plan", plan, "--image", "img"},
		"apply-hook":         {empty},
		"preflight":          {"--api-server=127.0.0.1:1", "--canary=127.0.0.1:0"},
		"version":            {},
		"completion":         {"bash"},
	}
}

// isolate keeps the environment from choosing a database or a cluster.
func isolate(t *testing.T) {
	t.Setenv("KEYLEDGER_DATABASE_URL", "")
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KEYLEDGER_LOG_LEVEL", "")
	t.Setenv(EnvPreflightCanary, "")
	t.Setenv("HOME", t.TempDir())
}

// Every persistent flag works anywhere on the line, on every command:
// before the command's name, between a group's name and its command's,
// and after the arguments, with the same outputs and exit code. So does
// -o on every command that takes it.
func TestPersistentFlagsAnywhere(t *testing.T) {
	isolate(t)
	root := NewCommand(context.Background(), IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	commands := hermeticCommands(t)
	missing := filepath.Join(t.TempDir(), "absent", "kubeconfig")
	values := map[string]string{
		"database-url": unreachableDB,
		"kubeconfig":   missing,
		"context":      "nowhere",
		"verbosity":    "2",
		"quiet":        "",
	}
	var flags [][]string
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		v, ok := values[f.Name]
		require.True(t, ok, "persistent flag --%s has a value in this test", f.Name)
		forms := [][]string{{"--" + f.Name}}
		if f.Shorthand != "" {
			forms = append(forms, []string{"-" + f.Shorthand})
		}
		for _, form := range forms {
			if v != "" {
				form = append(form, v)
			}
			flags = append(flags, form)
		}
	})
	flags = append(flags, []string{"-o", "json"}, []string{"--output=json"})
	leaves := usageLeaves(root)
	require.Len(t, commands, len(leaves), "every command of the tree is in hermeticCommands, and nothing else")
	for _, c := range leaves {
		path := strings.Fields(strings.TrimPrefix(c.CommandPath(), "keyledger "))
		args, ok := commands[strings.Join(path, " ")]
		require.True(t, ok, "%s has hermetic arguments", c.CommandPath())
		for _, flag := range flags {
			if strings.HasPrefix(flag[0], "-o") || strings.HasPrefix(flag[0], "--output") {
				if c.Flags().Lookup("output") == nil {
					continue
				}
			}
			forms := [][]string{
				slices.Concat(flag, path, args),
				slices.Concat(path[:1], flag, path[1:], args),
				slices.Concat(path, args, flag),
			}
			first := invoke(forms[0]...).normalized()
			for _, form := range forms[1:] {
				got := invoke(form...).normalized()
				require.Equal(t, first, got, "keyledger %s and keyledger %s", strings.Join(forms[0], " "), strings.Join(form, " "))
			}
		}
	}

	// The flags are not ignored: each changes what the command does.
	require.Equal(t, ExitUsage, invoke("journal", "list").code, "no database")
	require.Equal(t, ExitUnavailable, invoke("--database-url", unreachableDB, "journal", "list").code)
	i := invoke("--kubeconfig", missing, "keyring", "inspect", "ai/keyring")
	require.Contains(t, i.stderr, "the kubeconfig file does not exist")
	i = invoke("--context", "nowhere", "keyring", "inspect", "ai/keyring")
	require.Contains(t, i.stderr, `no context "nowhere"`, i.stderr)
	quiet := invoke("-q", "--database-url", unreachableDB, "migrate", "up", "--wait", "1s")
	loud := invoke("--database-url", unreachableDB, "migrate", "up", "--wait", "1s")
	require.Contains(t, loud.stderr, `"msg":"database wait"`)
	require.NotContains(t, quiet.stderr, `"msg":"database wait"`)
	require.Equal(t, loud.code, quiet.code)
	require.Equal(t, ExitUsage, invoke("-q", "-v", "1", "version").code, "--quiet and -v contradict")
}

// Every command's help has an Example.
func TestEveryCommandHasAnExample(t *testing.T) {
	t.Parallel()
	root := NewCommand(context.Background(), IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	var visit func(c *cobra.Command)
	visit = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			if s.Hidden {
				continue
			}
			require.NotEmpty(t, s.Example, "%s has an Example", s.CommandPath())
			var out bytes.Buffer
			args := append(strings.Fields(strings.TrimPrefix(s.CommandPath(), "keyledger ")), "--help")
			require.NoError(t, Run(context.Background(), args, IOStreams{Out: &out, ErrOut: &bytes.Buffer{}}), "%v", args)
			require.Contains(t, out.String(), "\nExamples:\n"+s.Example, "%v", args)
			visit(s)
		}
	}
	visit(root)
}

// A mistyped command is a usage error that names the nearest commands.
func TestSuggestions(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"plna":              "did you mean plan?",
		"jurnal list":       "did you mean journal?",
		"journal lsit":      "did you mean list?",
		"journal grnts":     "did you mean grant or grants?",
		"keyring inspcet":   "did you mean inspect?",
		"render credentals": "did you mean credentials?",
	} {
		i := invoke(strings.Fields(args)...)
		require.Equal(t, ExitUsage, i.code, args)
		require.Contains(t, i.stderr, want, args)
	}
}

// `keyledger completion bash`, sourced into bash, completes through the
// program: bash's completion function, called as bash calls it
// (COMP_WORDS, COMP_CWORD), runs `keyledger __complete` (a link to this
// test binary) and fills COMPREPLY.
func TestCompletionInBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	bin := t.TempDir()
	require.NoError(t, os.Symlink(self, filepath.Join(bin, "keyledger")))
	var script bytes.Buffer
	require.NoError(t, Run(context.Background(), []string{"completion", "bash"}, IOStreams{Out: &script, ErrOut: &bytes.Buffer{}}))
	scriptPath := filepath.Join(bin, "keyledger.bash")
	require.NoError(t, os.WriteFile(scriptPath, script.Bytes(), 0o600))
	files := t.TempDir()
	for _, name := range []string{"retire.json", "notes.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(files, name), []byte("{}"), 0o600))
	}

	complete := func(words ...string) []string {
		t.Helper()
		// Without the bash-completion package, the script's fallback needs
		// _get_comp_words_by_ref: the words as bash split them. compopt
		// only works inside a completion bash itself started.
		var sh strings.Builder
		sh.WriteString(`if [ -r /usr/share/bash-completion/bash_completion ]; then . /usr/share/bash-completion/bash_completion; fi
if ! declare -F _get_comp_words_by_ref >/dev/null; then
  _get_comp_words_by_ref() { cur="${COMP_WORDS[COMP_CWORD]}"; prev="${COMP_WORDS[COMP_CWORD-1]}"; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
fi
compopt() { :; }
_filedir() { :; }
`)
		sh.WriteString(". " + scriptPath + "\n")
		sh.WriteString("COMP_WORDS=(")
		for _, w := range words {
			sh.WriteString(" '" + w + "'")
		}
		sh.WriteString(" )\nCOMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n")
		sh.WriteString(`COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
__start_keyledger
printf '%s\n' "${COMPREPLY[@]}"
`)
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", sh.String())
		cmd.Dir = files
		cmd.Env = append(os.Environ(), asBinaryEnv+"=1", "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.Fields(string(out))
	}

	require.Equal(t, []string{"list"}, complete("keyledger", "journal", "l"))
	require.Equal(t, []string{"table", "json", "yaml"}, complete("keyledger", "plan", "-o", ""))
	require.Equal(t, []string{"json", "yaml"}, complete("keyledger", "run", "/abs/f.json", "-o", ""))
	require.Equal(t, []string{"list", "show", "prune", "grant", "revoke", "grants", "onboard", "rotate", "offboard"}, complete("keyledger", "--database-url", "x", "journal", ""))
	require.Equal(t, []string{"up", "down", "version", "recover"}, complete("keyledger", "migrate", ""))
	require.Equal(t, []string{"--database-url"}, complete("keyledger", "journal", "list", "--datab"))
	require.Equal(t, []string{"unreachable", "reachable"}, complete("keyledger", "preflight", "--expect-canary", ""))
	require.Contains(t, complete("keyledger", "pl"), "plan")
}

// docs/cli.md is what the command tree generates: a command, a flag or a
// help text changed without `make docs` fails here.
func TestCLIReferenceIsCurrent(t *testing.T) {
	isolate(t)
	root := NewCommand(context.Background(), IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	var buf bytes.Buffer
	writeReference(&buf, root)
	path := filepath.Join("..", "..", "..", "docs", "cli.md")
	if *update {
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	committed, err := os.ReadFile(path)
	require.NoError(t, err, "docs/cli.md: run make docs")
	if got := buf.String(); got != string(committed) {
		want := strings.Split(string(committed), "\n")
		lines := strings.Split(got, "\n")
		for i := range max(len(want), len(lines)) {
			w, g := "", ""
			if i < len(want) {
				w = want[i]
			}
			if i < len(lines) {
				g = lines[i]
			}
			if w != g {
				t.Fatalf("docs/cli.md differs from the command tree from line %d (run make docs):\ncommitted: %q\ngenerated: %q", i+1, w, g)
			}
		}
	}
}
