package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/workflow/command"
)

func TestParseInterspersedFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args       []string
		output     string
		positional []string
	}{
		{[]string{"id", "-o", "json"}, "json", []string{"id"}},
		{[]string{"-o", "json", "id"}, "json", []string{"id"}},
		{[]string{"id"}, "table", []string{"id"}},
		{[]string{"--", "-o"}, "table", []string{"-o"}},
		{[]string{"a", "-o", "json", "b"}, "json", []string{"a", "b"}},
	}
	for _, tc := range cases {
		var out outputFlag
		var positional []string
		cmd := &cobra.Command{Use: "t", Args: cobra.ArbitraryArgs, SilenceErrors: true, SilenceUsage: true,
			RunE: func(_ *cobra.Command, args []string) error { positional = args; return nil }}
		addOutput(cmd, &out, formatTable, formatJSON, formatYAML)
		cmd.SetArgs(tc.args)
		require.NoError(t, cmd.Execute(), "%v", tc.args)
		require.Equal(t, tc.output, out.format, "%v", tc.args)
		require.Equal(t, tc.positional, positional, "%v", tc.args)
	}
	err := Run(context.Background(), []string{"journal", "show", "id", "--nope"}, IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	require.Equal(t, ExitUsage, ExitCode(err))
}

// Wrong invocations exit 64 and never need a database or a cluster.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	cases := [][]string{
		{},
		{"frobnicate"},
		{"run"},
		{"run", "a", "b"},
		{"run", "relative.json"},
		{"run", "/nonexistent/keyledger/command.json"},
		{"migrate"},
		{"migrate", "sideways"},
		{"journal"},
		{"journal", "show"},
		{"journal", "list", "-o", "xml"},
		{"journal", "grant"},
		{"journal", "prune"},
		{"journal", "prune", "--older-than", "-1h"},
		{"journal", "prune", "--older-than", "1h", "extra"},
		{"journal", "prune", "--older-than", "soon"},
		{"journal", "show", "plan", "--limit", "0"},
		{"journal", "show", "plan", "--limit", "101"},
		{"journal", "show", "plan", "--before", "-2"},
		{"journal", "list", "--limit", "1001"},
		{"journal", "grant", "kl_a"},
		{"journal", "grant", "Bad-Role", "ns-a"},
		{"journal", "grant", "pg_monitor", "ns-a"},
		{"journal", "grant", "kl_a", "Not_A_Label"},
		{"journal", "revoke", "kl_a"},
		{"journal", "grants", "extra"},
		{"journal", "grants", "-o", "xml"},
		{"journal", "onboard"},
		{"journal", "onboard", "ns-a", "ns-b"},
		{"journal", "onboard", "Not_A_Label"},
		{"journal", "onboard", "keyledger-journal"},
		{"journal", "onboard", "ns-a", "--wait", "0s"},
		{"journal", "rotate", "ns-"},
		{"journal", "offboard", "ns-a", "-o", "xml"},
		{"migrate", "up", "--destroy-journal-records"},
		{"keyring", "inspect", "no-slash"},
		{"version", "extra"},
	}
	for _, args := range cases {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), args, IOStreams{Out: &out, ErrOut: &errOut})
		require.Equal(t, ExitUsage, ExitCode(err), "%v: %v", args, err)
	}
}

// A run that fails before reading its file prints one JSON line without the
// file's path.
func TestRunOutcomeLineHasNoPath(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	path := "/nonexistent/secret-place/command.json"
	err := Run(context.Background(), []string{"run", path}, IOStreams{Out: &out, ErrOut: &errOut})
	require.Equal(t, ExitUsage, ExitCode(err))
	require.Equal(t, 1, strings.Count(out.String(), "\n"))
	require.Contains(t, out.String(), `"outcome":"invalid"`)
	require.NotContains(t, out.String(), "secret-place")
	require.NotContains(t, errOut.String(), "secret-place")
}

// A database URL's password and host details never reach stdout or stderr,
// whatever fails: an unreachable server, a malformed URL.
func TestDatabaseURLNeverPrinted(t *testing.T) {
	t.Parallel()
	const canary = "CANARY-DSN-PASSWORD-51f0"
	command := filepath.Join(t.TempDir(), "retire.json")
	require.NoError(t, os.WriteFile(command, []byte(`{"apiVersion":"keyledger.dev/v1","kind":"KeyRetirement",`+
		`"metadata":{"requestId":"r1","mutationId":"m1"},"spec":{"namespace":"ai","secretName":"keyring",`+
		`"expectedUID":"0b3f5e2c-1111-2222-3333-444455556666","dataKey":"keyring.json","keyId":"k1","retirementId":"ret-1",`+
		`"expectedMaterialDigest":"sha256:`+strings.Repeat("ab", 32)+`"}}`), 0o600))
	for _, url := range []string{
		"postgres://keyledger:" + canary + "@127.0.0.1:1/journal?connect_timeout=2",
		"postgres://keyledger:" + canary + "@127.0.0.1:notaport/journal",
		"host=127.0.0.1 port=1 password=" + canary + " connect_timeout=2",
	} {
		for _, args := range [][]string{
			{"journal", "list", "--database-url", url},
			{"journal", "show", "mut-1", "--database-url", url},
			{"journal", "grant", "kl_a", "ns-a", "--database-url", url},
			{"journal", "revoke", "kl_a", "ns-a", "--database-url", url},
			{"journal", "grants", "--history", "--database-url", url},
			{"migrate", "down", "--destroy-journal-records", "--database-url", url},
			{"migrate", "version", "--database-url", url},
			{"run", "--database-url", url, "--kubeconfig", "/nonexistent/kubeconfig", command},
		} {
			var out, errOut bytes.Buffer
			err := Run(context.Background(), args, IOStreams{Out: &out, ErrOut: &errOut})
			require.Error(t, err, "%v", args[:2])
			require.Contains(t, []int{ExitUsage, ExitUnavailable}, ExitCode(err), "%v: %v", args[:2], err)
			require.NotContains(t, out.String()+errOut.String()+err.Error(), canary, "%v", args[:2])
		}
	}
}

// journal grant and revoke name the refused argument, with its reason,
// before connecting anywhere.
func TestGrantArgumentsNamed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args   []string
		reason string
		names  string
	}{
		{[]string{"journal", "grant", "Bad-Role", "ns-a"}, "invalid-role", `"Bad-Role"`},
		{[]string{"journal", "revoke", "pg_monitor", "ns-a"}, "invalid-role", `"pg_monitor"`},
		{[]string{"journal", "grant", "kl_a", "ns-a", "ns-b-"}, "invalid-namespace", `"ns-b-"`},
		{[]string{"journal", "onboard", "Team_A"}, "invalid-namespace", `"Team_A"`},
		{[]string{"journal", "offboard", "keyledger-journal"}, "namespace-is-journal", `"keyledger-journal"`},
		{[]string{"journal", "rotate", strings.Repeat("a", 54)}, "invalid-namespace", "63"},
	} {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), c.args, IOStreams{Out: &out, ErrOut: &errOut})
		require.Equal(t, ExitUsage, ExitCode(err), "%v", c.args)
		require.Empty(t, out.String())
		require.Contains(t, errOut.String(), "["+c.reason+", exit 64]", "%v", c.args)
		require.Contains(t, errOut.String(), c.names)
		require.Contains(t, errOut.String(), "keyledger "+strings.Join(c.args[:2], " ")+":")
	}
}

// Every kind the command envelope accepts has exactly one family, and no
// family answers a kind the envelope does not know.
func TestEveryKindHasAFamily(t *testing.T) {
	t.Parallel()
	var kinds []string
	for k := range families {
		kinds = append(kinds, k)
	}
	require.ElementsMatch(t, command.Kinds, kinds)
}
