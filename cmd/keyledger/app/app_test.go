package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
		var flags commonFlags
		fs := newFlagSet("t", IOStreams{ErrOut: &bytes.Buffer{}})
		flags.addOutput(fs)
		require.NoError(t, parse(fs, tc.args), "%v", tc.args)
		require.Equal(t, tc.output, flags.output, "%v", tc.args)
		require.Equal(t, tc.positional, fs.Args(), "%v", tc.args)
	}
	fs := newFlagSet("t", IOStreams{ErrOut: &bytes.Buffer{}})
	err := parse(fs, []string{"id", "--nope"})
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
		{"journal", "list", "-o", "yaml"},
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
