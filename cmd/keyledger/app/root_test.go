package app

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// keyledger --version prints what keyledger version prints and exits 0.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), args, IOStreams{Out: &out, ErrOut: &errOut})
		require.NoError(t, err, "%v", args)
		require.Equal(t, ExitDone, ExitCode(err))
		var v map[string]any
		require.NoError(t, json.Unmarshal(out.Bytes(), &v), "%v: %q", args, out.String())
		require.Equal(t, Version, v["version"], "%v", args)
		require.NotEmpty(t, v["go"], "%v", args)
		require.Empty(t, errOut.String(), "%v", args)
	}
}

// keyledger completion bash|zsh|fish prints a script; bash accepts the
// bash one (bash -n parses it without running it), and it completes the
// commands of the usage.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish"} {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), []string{"completion", shell}, IOStreams{Out: &out, ErrOut: &errOut})
		require.NoError(t, err, shell)
		require.Contains(t, out.String(), "keyledger", shell)
		require.Empty(t, errOut.String(), shell)
		if shell != "bash" {
			continue
		}
		bash, err := exec.LookPath("bash")
		if err != nil {
			t.Skip("no bash")
		}
		script := filepath.Join(t.TempDir(), "keyledger.bash")
		require.NoError(t, os.WriteFile(script, out.Bytes(), 0o600))
		res, err := exec.Command(bash, "-n", script).CombinedOutput()
		require.NoError(t, err, "bash -n: %s", res)
	}
	// What the script asks the program for: the commands.
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), []string{"__complete", ""}, IOStreams{Out: &out, ErrOut: &bytes.Buffer{}}))
	for _, name := range []string{"run", "plan", "migrate", "journal", "keyring", "history", "render", "apply-hook", "preflight", "version", "completion"} {
		require.Contains(t, out.String(), name+"\t", "completion of %s", name)
	}
	var bad bytes.Buffer
	err := Run(context.Background(), []string{"completion", "tcsh"}, IOStreams{Out: &bytes.Buffer{}, ErrOut: &bad})
	require.Equal(t, ExitUsage, ExitCode(err), "%v", err)
}

// The usage text has one source (the command tree): every command of the
// tree has a description and an entry in the program's usage, and the
// program's, each group's and each command's help print the same lines.
func TestUsageHasOneSource(t *testing.T) {
	t.Parallel()
	root := NewCommand(context.Background(), IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	var program bytes.Buffer
	require.NoError(t, Run(context.Background(), []string{"--help"}, IOStreams{Out: &program, ErrOut: &bytes.Buffer{}}))
	commands := map[string]bool{}
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		commands[c.Name()] = true
		require.NotEmpty(t, c.Short, "%s has a description", c.Name())
	}
	leaves := usageLeaves(root)
	for _, c := range leaves {
		top, _, _ := strings.Cut(strings.TrimPrefix(c.CommandPath(), "keyledger "), " ")
		require.True(t, commands[top], "entry %q names a command of the tree", c.CommandPath())
		require.True(t, strings.HasPrefix(synopsis(c), c.CommandPath()), "entry %q: synopsis %q", c.CommandPath(), synopsis(c))
		require.Contains(t, program.String(), "  "+synopsis(c), "the program's usage lists %s", c.CommandPath())
	}
	for name := range commands {
		found := false
		for _, c := range leaves {
			found = found || strings.HasPrefix(c.CommandPath(), "keyledger "+name)
		}
		require.True(t, found, "command %s has an entry", name)
	}
	for _, args := range [][]string{{"run", "--help"}, {"journal", "--help"}, {"journal", "show", "--help"}, {"history", "--help"}, {"help", "plan"}} {
		var out bytes.Buffer
		require.NoError(t, Run(context.Background(), args, IOStreams{Out: &out, ErrOut: &bytes.Buffer{}}), "%v", args)
		require.True(t, strings.HasPrefix(out.String(), "Usage:\n"), "%v", args)
		usage, _, _ := strings.Cut(strings.TrimPrefix(out.String(), "Usage:\n"), "\n\n")
		require.NotEmpty(t, strings.TrimSpace(usage), "%v", args)
		require.Contains(t, program.String(), usage, "%v: the command's usage lines are the program's", args)
	}
}
