package app

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
)

// resetLastRun forgets the run an earlier test made in this process.
func resetLastRun(t *testing.T) {
	t.Helper()
	lastRun.Lock()
	lastRun.line = nil
	lastRun.Unlock()
	t.Cleanup(func() {
		lastRun.Lock()
		lastRun.line = nil
		lastRun.Unlock()
	})
}

// runAndTerminate runs keyledger with args as main does, with the
// termination log at a file of the test's, and returns what was written.
func runAndTerminate(t *testing.T, args ...string) (map[string]any, string) {
	t.Helper()
	resetLastRun(t)
	log := filepath.Join(t.TempDir(), "termination-log")
	require.NoError(t, os.WriteFile(log, nil, 0o600)) // the kubelet creates it empty
	t.Setenv(TerminationLogEnv, log)
	var out, errOut bytes.Buffer
	err := Run(context.Background(), args, IOStreams{Out: &out, ErrOut: &errOut})
	WriteTerminationMessage(err)
	raw, rerr := os.ReadFile(log)
	require.NoError(t, rerr)
	require.Equal(t, 1, bytes.Count(raw, []byte("\n")), "one line: %q", raw)
	var got map[string]any
	require.NoError(t, json.Unmarshal(raw, &got), "%s", raw)
	require.EqualValues(t, ExitCode(err), got["exitCode"], "%s", raw)
	return got, string(raw)
}

// A run that ends writes its outcome, reason, kind and mutationId and the
// exit code to the termination log, and nothing else: no path, no
// database URL, no message.
func TestTerminationMessageOfARun(t *testing.T) {
	t.Setenv("KEYLEDGER_DATABASE_URL", "")
	secretPlace := filepath.Join(t.TempDir(), "secret-place")
	require.NoError(t, os.Mkdir(secretPlace, 0o700))
	bad := filepath.Join(secretPlace, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(strings.Replace(validRetirement(), `"keyId":"k1"`, `"keyId":"k 1"`, 1)), 0o600))
	got, raw := runAndTerminate(t, "run", "--database-url", unreachableDB, bad)
	require.Equal(t, map[string]any{"outcome": "invalid", "reason": ReasonInvalidCommand, "kind": "KeyRetirement",
		"mutationId": "m1", "exitCode": float64(ExitUsage)}, got)
	for _, leak := range []string{"secret-place", "127.0.0.1", "keyId", "k 1"} {
		require.NotContains(t, raw, leak)
	}

	// A command that is not a run: its outcome, reason and exit code.
	got, _ = runAndTerminate(t, "migrate", "sideways")
	require.Equal(t, map[string]any{"outcome": "invalid", "reason": ReasonUsage, "exitCode": float64(ExitUsage)}, got)
	got, _ = runAndTerminate(t, "version")
	require.Equal(t, map[string]any{"outcome": "done", "exitCode": float64(0)}, got)
}

// Words that are not words are left off: a forged or buggy reason or kind
// never carries a path or an address into the pod's status.
func TestTerminationMessageKeepsOnlyWords(t *testing.T) {
	resetLastRun(t)
	noteRunOutcome(&outcomeLine{Outcome: "refused", Reason: "see /etc/keyledger/plan.json", Kind: "Key Retirement",
		MutationID: "m/../../x", Error: "10.0.0.1:5432 said no"})
	raw := string(terminationMessage(nil))
	require.JSONEq(t, `{"outcome":"refused","exitCode":0}`, raw)
}

// A run that ended without its journal says so in the pod's status too,
// with the word its stdout line has; a summary's other members stay out,
// and a journal member that is not a word is left off.
func TestTerminationMessageSaysJournalNotConsulted(t *testing.T) {
	resetLastRun(t)
	noteRunOutcome(&outcomeLine{Outcome: "existing", Kind: "CredentialPlan", MutationID: "m1",
		Summary: store.DetailOf(map[string]any{"journal": "not-consulted", "authorship": "not-checked", "calls": 0})})
	require.JSONEq(t, `{"outcome":"existing","kind":"CredentialPlan","mutationId":"m1","journal":"not-consulted","exitCode":0}`,
		string(terminationMessage(nil)))

	noteRunOutcome(&outcomeLine{Outcome: "existing", Summary: store.DetailOf(map[string]any{"journal": "10.0.0.1:5432"})})
	require.JSONEq(t, `{"outcome":"existing","exitCode":0}`, string(terminationMessage(nil)))
}

// Writing the message never fails a run and never creates a file: a
// missing directory, a missing file, a read-only file, a FIFO without a
// reader (which would block an ordinary open) and a symlink are left
// alone.
func TestTerminationLogIsBestEffort(t *testing.T) {
	dir := t.TempDir()
	msg := []byte(`{"outcome":"done","exitCode":0}` + "\n")

	missing := filepath.Join(dir, "missing")
	writeTerminationLog(missing, msg)
	require.NoFileExists(t, missing, "never created")
	writeTerminationLog(filepath.Join(dir, "no-dir", "log"), msg)

	readOnly := filepath.Join(dir, "read-only")
	require.NoError(t, os.WriteFile(readOnly, []byte("before"), 0o400))
	if os.Geteuid() != 0 { // root writes a 0400 file anyway
		writeTerminationLog(readOnly, msg)
		b, err := os.ReadFile(readOnly)
		require.NoError(t, err)
		require.Equal(t, "before", string(b))
	}

	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	writeTerminationLog(fifo, msg) // returns: nobody reads the FIFO

	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, []byte("before"), 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(target, link))
	writeTerminationLog(link, msg)
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "before", string(b), "a symlink is not followed")

	// A longer earlier content is replaced, not overwritten in part.
	regular := filepath.Join(dir, "regular")
	require.NoError(t, os.WriteFile(regular, bytes.Repeat([]byte("x"), 4096), 0o600))
	writeTerminationLog(regular, msg)
	b, err = os.ReadFile(regular)
	require.NoError(t, err)
	require.Equal(t, string(msg), string(b))
}
