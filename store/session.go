package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrSessionNotFresh means the journal handed keyledger a session that
// already holds advisory locks: a session another client used and that
// was not reset, which only a pooler in front of the journal can do. A
// run's live lock is a session advisory lock (runLive), and the
// locks a session holds are reentrant, so a run on such a session could
// take a lock another process holds as its own. Nothing is read or
// written on it.
var ErrSessionNotFresh = errors.New("the journal's session is not fresh: it holds advisory locks it did not take " +
	"(a pooler in front of the journal must run in session mode and reset every session: server_reset_query = DISCARD ALL)")

// freshSQL counts the advisory locks the session holds. It reads
// pg_lock_status(), the function the pg_locks view selects from, directly:
// in a new session, where every statement is planned from cold catalogs,
// that is about a third cheaper than through the view.
const freshSQL = `SELECT count(*) FROM pg_catalog.pg_lock_status() l
	WHERE l.locktype = 'advisory' AND l.pid = pg_catalog.pg_backend_pid()`

// startSession is every connection's first round trip (the pool's
// AfterConnect): it sets the session's timeouts (SessionTimeouts.setSQL)
// and checks that the session holds no advisory lock. A session a pooler
// (PgBouncer, session mode) hands on to the next client after DISCARD ALL
// holds none, with its catalog caches warm; one it hands on without a
// reset is refused (ErrSessionNotFresh).
func startSession(ctx context.Context, conn *pgx.Conn, t SessionTimeouts) error {
	results, err := conn.PgConn().Exec(ctx, t.setSQL()+"; "+freshSQL).ReadAll()
	if err != nil {
		return fmt.Errorf("starting the journal session: %w", redact(err))
	}
	if len(results) != 4 || len(results[3].Rows) != 1 || len(results[3].Rows[0]) != 1 {
		return errors.New("starting the journal session: unexpected answer")
	}
	if string(results[3].Rows[0][0]) != "0" {
		return ErrSessionNotFresh
	}
	return nil
}
