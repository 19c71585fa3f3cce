package integration

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// A SecretUpdate that creates the Secret reports the created Secret's UID
// on stdout and in its completion record (the UID exists only in the
// create's answer).
func TestIntegrationCLIUpdateThatCreatesReportsUID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	as := e.AsWriter("created")
	out := suite.RequireOK(t, e.RunCmd(suite.UpdateCommand(e.NS, "created", "", "mut-create-uid", map[string][]byte{"token": suite.VCanary("uid")}), as), "completed")
	live := e.GetSecret("created")
	require.NotEmpty(t, live.UID)
	secret, ok := out["secret"].(map[string]any)
	require.True(t, ok, "stdout %v", out)
	require.Equal(t, string(live.UID), secret["uid"], "the outcome line names the created Secret's UID")

	_, records := e.JournalOf("mut-create-uid")
	require.Equal(t, store.RecordCompletion, records[len(records)-1].Kind)
	completion := workflowtest.Fields(records[len(records)-1].Detail)["secret"].(map[string]any)
	require.Equal(t, string(live.UID), completion["uid"], "the completion record names it too")
}

// Failures of the CLI against the real platform speak: an unreachable
// journal, an identity without rights, a missing Secret. Each prints one
// stderr line with what to do and exits with the documented code; no DSN
// reaches stderr.
func TestIntegrationCLIFailuresSpeak(t *testing.T) {
	t.Parallel()
	e := setup(t)
	unreachable := suite.WithDatabase("postgres://keyledger:CANARY-PW-77@127.0.0.1:1/journal?connect_timeout=2")
	cases := []struct {
		name string
		args []string
		opts []suite.RunOption
		code int
		want string
	}{
		{"journal-unreachable", []string{"journal", "list"}, []suite.RunOption{unreachable}, 69, "PostgreSQL accepts connections"},
		{"journal-show-missing", []string{"journal", "show", "mut-none"}, nil, 64, "no operation with mutation ID"},
		{"keyring-missing-secret", []string{"keyring", "inspect", e.NS + "/absent"}, nil, 2, "secret-absent"},
		{"history-bad-argument", []string{"history", "no-slash"}, nil, 64, "NAMESPACE/NAME"},
		{"migrate-as-operator", []string{"migrate", "up"}, nil, 64, "not-schema-owner"},
	}
	for _, tc := range cases {
		r := e.Keyledger(tc.args, tc.opts...)
		require.Equal(t, tc.code, r.Code, "%s: stdout %s stderr %s", tc.name, r.Stdout, r.Stderr)
		require.Contains(t, r.Stderr, tc.want, tc.name)
		require.Contains(t, r.Stderr, "to fix:", tc.name)
		require.NotContains(t, r.Stderr, "CANARY-PW-77", tc.name)
	}
}
