package versioned

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// TestLoadDefersTheDigest: the command Load decodes leaves an update's
// PBKDF2 digest pending (it is computed while the permission check and the
// journal connect run), after every check of the command passed; the
// engine resolves it before the preparation, which journals exactly the
// digest Decode computes, and the decisions' intent digests use it.
func TestLoadDefersTheDigest(t *testing.T) {
	t.Parallel()
	body := envelope("SecretUpdate", `{"namespace":"`+testNamespace+`","name":"`+testName+`","expectedResourceVersion":"","data":{"password":"c2VjcmV0"}}`)
	want, err := Decode(writeCommand(t, body, 0o600))
	require.NoError(t, err)
	require.NotEmpty(t, want.Digest)

	cmd, err := decode(writeCommand(t, body, 0o600), true)
	require.NoError(t, err)
	require.Empty(t, cmd.Digest, "pending until the engine resolves it")

	e := newEnv(t)
	res, err := workflow.Operate(context.Background(), e.j, plan(cmd, e.api, e.limit), nil)
	require.NoError(t, err)
	require.Equal(t, "completed", res.Run.Op.Outcome)
	require.Equal(t, want.Digest, res.Run.Op.CommandDigest, "the preparation journals Decode's digest")
	require.Equal(t, want.Digest, cmd.Digest)
	// The same command decoded at once, on a fresh namespace: the same
	// records with the same digests (the calls' intent digests are built
	// from the command digest).
	e2 := newEnv(t)
	res2, err := workflow.Operate(context.Background(), e2.j, plan(want, e2.api, e2.limit), nil)
	require.NoError(t, err)
	require.Equal(t, digests(res2.Run.Records), digests(res.Run.Records))

	// A bad command is refused before any digest is started.
	_, err = decode(writeCommand(t, envelope("SecretUpdate", `{"namespace":"`+testNamespace+`","name":"`+testName+`","expectedResourceVersion":"","data":{"p":"QR=="}}`), 0o600), true)
	require.Error(t, err)
}

func digests(records []store.Record) []string {
	out := make([]string, 0, len(records))
	for _, r := range records {
		out = append(out, string(r.Kind)+" "+r.Step+" "+r.Digest)
	}
	return out
}
