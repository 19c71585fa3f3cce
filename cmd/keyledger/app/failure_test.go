package app

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// unreachableDB is a database URL nothing listens on (loopback port 1).
const unreachableDB = "postgres://keyledger@127.0.0.1:1/journal?connect_timeout=2"

// writeCommand writes a command file into a test directory and returns its
// absolute path.
func writeCommand(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

// validRetirement is a well-formed KeyRetirement command.
func validRetirement() string {
	return `{"apiVersion":"keyledger.dev/v1","kind":"KeyRetirement",` +
		`"metadata":{"requestId":"r1","mutationId":"m1"},"spec":{"namespace":"ai","secretName":"keyring",` +
		`"expectedUID":"0b3f5e2c-1111-2222-3333-444455556666","dataKey":"keyring.json","keyId":"k1","retirementId":"ret-1",` +
		`"expectedMaterialDigest":"sha256:` + strings.Repeat("ab", 32) + `"}}`
}

// Every command, given one bad input, prints a non-empty message on stderr
// and exits with the code README's table documents; no message names a
// file path.
func TestEveryFailureSpeaks(t *testing.T) {
	t.Setenv("KEYLEDGER_DATABASE_URL", "")
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv(EnvPreflightCanary, "")
	dir := t.TempDir()
	missingKubeconfig := filepath.Join(dir, "secret-place", "kubeconfig")
	badField := writeCommand(t, "bad.json", strings.Replace(validRetirement(), `"keyId":"k1"`, `"keyId":"k 1"`, 1))
	valid := writeCommand(t, "retire.json", validRetirement())
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"no-command", nil, ExitUsage},
		{"unknown-command", []string{"frobnicate"}, ExitUsage},
		{"run-invalid-field", []string{"run", "--database-url", unreachableDB, badField}, ExitUsage},
		{"run-no-kubeconfig", []string{"run", "--database-url", unreachableDB, "--kubeconfig", missingKubeconfig, valid}, ExitUsage},
		{"plan-invalid-field", []string{"plan", "--database-url", unreachableDB, badField}, ExitUsage},
		{"plan-no-kubeconfig", []string{"plan", "--database-url", unreachableDB, "--kubeconfig", missingKubeconfig, valid}, ExitUsage},
		{"migrate-unreachable", []string{"migrate", "--database-url", unreachableDB, "up"}, ExitUnavailable},
		{"migrate-direction", []string{"migrate", "sideways"}, ExitUsage},
		{"journal-list-unreachable", []string{"journal", "list", "--database-url", unreachableDB}, ExitUnavailable},
		{"journal-show-no-id", []string{"journal", "show"}, ExitUsage},
		{"journal-no-subcommand", []string{"journal"}, ExitUsage},
		{"keyring-inspect-no-kubeconfig", []string{"keyring", "inspect", "--kubeconfig", missingKubeconfig, "ai/keyring"}, ExitUsage},
		{"keyring-bad-target", []string{"keyring", "inspect", "no-slash"}, ExitUsage},
		{"history-bad-version", []string{"history", "shop/db", "--version", "zero"}, ExitUsage},
		{"history-no-kubeconfig", []string{"history", "--database-url", unreachableDB, "--kubeconfig", missingKubeconfig, "shop/db"}, ExitUsage},
		{"render-no-image", []string{"render", "credentials", "--plan", valid}, ExitUsage},
		{"apply-hook-no-dir", []string{"apply-hook"}, ExitUsage},
		{"apply-hook-empty-dir", []string{"apply-hook", filepath.Join(dir, "secret-place")}, ExitUsage},
		{"preflight-no-canary", []string{"preflight", "--api-server=127.0.0.1:1"}, ExitUsage},
		{"preflight-ca-file", []string{"preflight", "--api-server=127.0.0.1:1", "--canary=127.0.0.1:2", "--ca-file", missingKubeconfig}, ExitUsage},
		{"version-extra", []string{"version", "extra"}, ExitUsage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := Run(context.Background(), tc.args, IOStreams{Out: &out, ErrOut: &errOut})
			require.Equal(t, tc.code, ExitCode(err), "%v", err)
			require.NotEmpty(t, strings.TrimSpace(errOut.String()), "stderr")
			require.NotContains(t, out.String()+errOut.String(), "secret-place", "a path reached the output")
			require.NotContains(t, errOut.String(), "127.0.0.1:1/journal", "a DSN reached stderr")
			last := lastLine(errOut.String())
			if tc.name == "run-invalid-field" || tc.name == "run-no-kubeconfig" || strings.HasPrefix(tc.name, "preflight") {
				// JSON lines on stderr: the last one says what failed and what to do.
				var l map[string]any
				require.NoError(t, json.Unmarshal([]byte(last), &l), last)
				require.NotEmpty(t, l["error"], last)
				require.NotEmpty(t, l["fix"], last)
				return
			}
			require.Equal(t, 1, strings.Count(errOut.String(), "\n"), "one line: %q", errOut.String())
			require.Contains(t, last, "to fix:")
		})
	}
}

// A journal session timeout setting that is not valid exits 64 naming the
// variable, before the kubeconfig is loaded or anything is contacted (the
// kubeconfig is missing and the database unreachable: either would be 69).
func TestBadSessionTimeoutSettingIsUsage(t *testing.T) {
	t.Setenv("KEYLEDGER_DATABASE_URL", "")
	missingKubeconfig := filepath.Join(t.TempDir(), "absent", "kubeconfig")
	valid := writeCommand(t, "retire.json", validRetirement())
	for _, variable := range []string{"KEYLEDGER_DB_STATEMENT_TIMEOUT", "KEYLEDGER_DB_LOCK_TIMEOUT", "KEYLEDGER_DB_IDLE_IN_TRANSACTION_TIMEOUT"} {
		t.Run(variable, func(t *testing.T) {
			t.Setenv(variable, "0")
			for _, args := range [][]string{
				{"run", "--database-url", unreachableDB, "--kubeconfig", missingKubeconfig, valid},
				{"plan", "--database-url", unreachableDB, "--kubeconfig", missingKubeconfig, valid},
				{"journal", "list", "--database-url", unreachableDB},
				{"history", "--database-url", unreachableDB, "--kubeconfig", missingKubeconfig, "shop/db"},
			} {
				var out, errOut bytes.Buffer
				err := Run(context.Background(), args, IOStreams{Out: &out, ErrOut: &errOut})
				require.Equal(t, ExitUsage, ExitCode(err), "%v: %v", args, err)
				require.Contains(t, errOut.String(), variable, "%v", args)
			}
		})
	}
}

// With -o json the failure line is a JSON object with error and reason.
func TestFailureLineJSON(t *testing.T) {
	t.Setenv("KEYLEDGER_DATABASE_URL", "")
	for _, args := range [][]string{
		{"journal", "list", "-o", "json", "--database-url", unreachableDB},
		{"journal", "show", "-o", "json"},
		{"history", "shop/db", "-o=json", "--version", "0"},
	} {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), args, IOStreams{Out: &out, ErrOut: &errOut})
		require.Error(t, err)
		var l errorLine
		require.NoError(t, json.Unmarshal(errOut.Bytes(), &l), "%v: %q", args, errOut.String())
		require.NotEmpty(t, l.Error, "%v", args)
		require.NotEmpty(t, l.Reason, "%v", args)
		require.NotEmpty(t, l.Fix, "%v", args)
		require.Equal(t, ExitCode(err), l.ExitCode, "%v", args)
		require.Empty(t, out.String(), "%v", args)
	}
}

// --help exits 0 with the usage on stdout and nothing on stderr, for the
// program and every command.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"},
		{"run", "--help"}, {"plan", "--help"}, {"migrate", "--help"}, {"migrate", "up", "-h"},
		{"journal", "--help"}, {"journal", "list", "--help"}, {"journal", "show", "--help"},
		{"keyring", "--help"}, {"keyring", "inspect", "--help"},
		{"history", "--help"}, {"history", "shop/db", "--help"},
		{"render", "--help"}, {"render", "credentials", "--help"},
		{"apply-hook", "--help"}, {"preflight", "--help"}, {"version", "--help"},
	} {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), args, IOStreams{Out: &out, ErrOut: &errOut})
		require.NoError(t, err, "%v", args)
		require.Equal(t, ExitDone, ExitCode(err))
		require.Contains(t, out.String(), "Usage:", "%v", args)
		if !isHelp(args[0]) && args[0] != "help" {
			require.Contains(t, out.String(), "keyledger "+args[0], "%v", args)
		}
		require.Empty(t, errOut.String(), "%v", args)
	}
}

// Everything is validated before the kubeconfig is loaded: an invalid
// command file, an invalid environment setting or a missing database with a
// broken kubeconfig exits 64, not 69.
func TestValidateBeforeTouching(t *testing.T) {
	t.Setenv("KEYLEDGER_DATABASE_URL", "")
	broken := writeCommand(t, "kubeconfig", "this is not a kubeconfig")
	update := writeCommand(t, "update.json", `{"apiVersion":"keyledger.dev/v1","kind":"SecretUpdate",`+
		`"metadata":{"requestId":"r1","mutationId":"m1"},"spec":{"namespace":"shop","name":"db",`+
		`"expectedResourceVersion":"","data":{"password":"cGFzcw=="}}}`)
	badFamily := writeCommand(t, "bad-update.json", `{"apiVersion":"keyledger.dev/v1","kind":"SecretUpdate",`+
		`"metadata":{"requestId":"r1","mutationId":"m1"},"spec":{"namespace":"shop","name":"db",`+
		`"expectedResourceVersion":"x","data":{}}}`)
	valid := writeCommand(t, "retire.json", validRetirement())
	cases := []struct {
		name string
		env  []string
		args []string
	}{
		{"family-field", nil, []string{"run", "--database-url", unreachableDB, "--kubeconfig", broken, badFamily}},
		{"history-limit", []string{"KEYLEDGER_HISTORY_LIMIT", "0"}, []string{"run", "--database-url", unreachableDB, "--kubeconfig", broken, update}},
		{"log-level", []string{"KEYLEDGER_LOG_LEVEL", "chatty"}, []string{"run", "--database-url", unreachableDB, "--kubeconfig", broken, valid}},
		{"no-database", nil, []string{"run", "--kubeconfig", broken, valid}},
		{"plan-family-field", nil, []string{"plan", "--database-url", unreachableDB, "--kubeconfig", broken, badFamily}},
		{"bad-database-url", nil, []string{"run", "--database-url", "postgres://x:notaport/db", "--kubeconfig", broken, valid}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != nil {
				t.Setenv(tc.env[0], tc.env[1])
			}
			var out, errOut bytes.Buffer
			err := Run(context.Background(), tc.args, IOStreams{Out: &out, ErrOut: &errOut})
			require.Equal(t, ExitUsage, ExitCode(err), "%v", err)
			if tc.args[0] == "run" {
				require.Contains(t, out.String(), `"outcome":"invalid"`)
			}
			require.NotContains(t, errOut.String(), ReasonInvalidKubeconfig)
		})
	}
	// The same files with a good setting reach the kubeconfig, which is
	// malformed: 64 with reason invalid-kubeconfig.
	var out, errOut bytes.Buffer
	err := Run(context.Background(), []string{"run", "--database-url", unreachableDB, "--kubeconfig", broken, valid}, IOStreams{Out: &out, ErrOut: &errOut})
	require.Equal(t, ExitUsage, ExitCode(err), "%v", err)
	require.Contains(t, errOut.String(), ReasonInvalidKubeconfig)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
