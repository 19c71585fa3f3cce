package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// silenceMargin is how much longer than the statement timeout a journal
// connection may go without a byte while keyledger waits for an answer.
// The server ends every statement within statement_timeout (a lock wait
// within lock_timeout, which is no longer), and says so: only a journal
// that stopped answering (a black-holed network, a pooler that never
// hands over a server session, a hung server) stays silent past it.
const silenceMargin = 3 * time.Second

// ErrJournalSilent is the failure of a read from the journal that got no
// byte for the statement timeout and silenceMargin: the run ends as for a
// lost connection (unavailable before its preparation is durable,
// interrupted after), instead of waiting for TCP to give up hours later.
var ErrJournalSilent = errors.New("the journal stopped answering")

// silentError is ErrJournalSilent with the bound, for the message.
type silentError struct{ after time.Duration }

func (e *silentError) Error() string {
	return fmt.Sprintf("%s: no answer for %s", ErrJournalSilent, e.after)
}
func (e *silentError) Is(target error) bool { return target == ErrJournalSilent }

// boundSilence makes every connection cfg dials end a read that gets no
// byte for after (answerBound): a read deadline armed afresh before each
// read, unless pgconn has set a deadline of its own (a connect or a
// canceled context), which then stands.
func boundSilence(cfg *pgconn.Config, after time.Duration) {
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &silenceBoundConn{Conn: c, after: after}, nil
	}
}

// answerBound is how long a journal read may go without a byte.
func answerBound(t SessionTimeouts) time.Duration { return t.Statement + silenceMargin }

// silenceBoundConn is a connection whose reads end after a silence.
type silenceBoundConn struct {
	net.Conn
	after time.Duration
	mu    sync.Mutex
	// theirs is the read deadline pgconn set (zero: none, ours applies).
	theirs time.Time
	// ours says the deadline in force is this connection's own.
	ours bool
}

func (c *silenceBoundConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	c.ours = c.theirs.IsZero()
	if c.ours {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.after))
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(b)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		c.mu.Lock()
		ours := c.ours
		c.mu.Unlock()
		if ours {
			return n, &silentError{after: c.after}
		}
	}
	return n, err
}

func (c *silenceBoundConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.theirs, c.ours = t, false
	return c.Conn.SetDeadline(t)
}

func (c *silenceBoundConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.theirs, c.ours = t, false
	return c.Conn.SetReadDeadline(t)
}
