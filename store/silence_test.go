package store

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A read that gets no byte for the bound ends with ErrJournalSilent, whose
// redacted message says only that; a read that gets its bytes returns
// them; a deadline pgconn sets (a connect, a canceled context) stands
// instead of the bound, and its expiry is pgconn's own timeout; once
// pgconn clears it, the bound applies again.
func TestSilenceBoundConn(t *testing.T) {
	t.Parallel()
	client, server := net.Pipe()
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	c := &silenceBoundConn{Conn: client, after: 30 * time.Millisecond}

	go func() { _, _ = server.Write([]byte("ok")) }()
	b := make([]byte, 2)
	n, err := c.Read(b)
	require.NoError(t, err)
	require.Equal(t, "ok", string(b[:n]))

	_, err = c.Read(b)
	require.ErrorIs(t, err, ErrJournalSilent, "nothing came within the bound")
	require.EqualError(t, redact(err), "the journal stopped answering: no answer for 30ms")

	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err = c.Read(b)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.False(t, errors.Is(err, ErrJournalSilent), "pgconn's own deadline, not the bound")

	require.NoError(t, c.SetDeadline(time.Time{}))
	_, err = c.Read(b)
	require.ErrorIs(t, err, ErrJournalSilent, "the bound again once pgconn cleared its deadline")
}
