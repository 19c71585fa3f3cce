package store

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"
)

// The environment settings of the journal's session timeouts (Go
// durations, e.g. 30s, 1500ms).
const (
	EnvStatementTimeout         = "KEYLEDGER_DB_STATEMENT_TIMEOUT"
	EnvLockTimeout              = "KEYLEDGER_DB_LOCK_TIMEOUT"
	EnvIdleInTransactionTimeout = "KEYLEDGER_DB_IDLE_IN_TRANSACTION_TIMEOUT"
)

// SessionTimeouts bound every session keyledger opens on the journal, so a
// run never hangs on PostgreSQL: a statement that runs too long is
// canceled (statement_timeout), a row lock another session holds is waited
// for only so long (lock_timeout), and a session that stops in the middle
// of a transaction (a run cut off, a frozen pod) is ended by the server,
// which releases its locks (idle_in_transaction_session_timeout). A
// timeout fails the statement (SQLSTATE 57014, 55P03 or 25P03); the engine
// ends the run uncertain (exit 75), and the same command run again
// settles it.
type SessionTimeouts struct {
	Statement, Lock, IdleInTransaction time.Duration
}

// DefaultSessionTimeouts are the timeouts unless the environment sets
// others: each journal statement keyledger sends is a few rows' work, and a
// Job's activeDeadlineSeconds (300) leaves room for several.
var DefaultSessionTimeouts = SessionTimeouts{Statement: 30 * time.Second, Lock: 10 * time.Second, IdleInTransaction: 30 * time.Second}

// The bounds a session timeout setting must stay within: 0 would switch
// the timeout off, which is the hang it prevents.
const (
	minSessionTimeout = 100 * time.Millisecond
	maxSessionTimeout = time.Hour
)

// SettingError is an environment setting of the store that is not valid.
type SettingError struct {
	// Name is the environment variable.
	Name string
	Err  error
}

func (e *SettingError) Error() string { return e.Name + ": " + e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// SessionTimeoutsFromEnv reads the three settings through lookup (unset:
// the default). A value that is not a duration between 100ms and 1h, in
// whole milliseconds, is a *SettingError naming the variable.
func SessionTimeoutsFromEnv(lookup func(string) (string, bool)) (SessionTimeouts, error) {
	t := DefaultSessionTimeouts
	for _, s := range []struct {
		name string
		into *time.Duration
	}{{EnvStatementTimeout, &t.Statement}, {EnvLockTimeout, &t.Lock}, {EnvIdleInTransactionTimeout, &t.IdleInTransaction}} {
		v, ok := lookup(s.name)
		if !ok || v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			return SessionTimeouts{}, &SettingError{Name: s.name, Err: fmt.Errorf("want a duration such as 10s or 1500ms, got %q", v)}
		case d < minSessionTimeout || d > maxSessionTimeout || d%time.Millisecond != 0:
			return SessionTimeouts{}, &SettingError{Name: s.name, Err: fmt.Errorf("want whole milliseconds from %s to %s, got %s", minSessionTimeout, maxSessionTimeout, v)}
		}
		*s.into = d
	}
	return t, nil
}

// setSQL sets the timeouts for the session (milliseconds): the first
// statements of every connection of the pool (startSession), so no
// session (and no statement, transaction or lock wait in it) escapes
// them. They are SET, not startup parameters: a session pooler passes a
// SET on to the server, where it refuses (PgBouncer) or drops a startup
// parameter it does not know.
func (t SessionTimeouts) setSQL() string {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	return "SET statement_timeout = " + ms(t.Statement) + "; SET lock_timeout = " + ms(t.Lock) +
		"; SET idle_in_transaction_session_timeout = " + ms(t.IdleInTransaction)
}

// sessionTimeouts are the timeouts Open applies: the environment's.
func sessionTimeouts() (SessionTimeouts, error) { return SessionTimeoutsFromEnv(os.LookupEnv) }

// SessionTimeouts reads the timeouts the journal's sessions are held to, as
// the server reports them for this Store's connections.
func (s *Store) SessionTimeouts(ctx context.Context) (SessionTimeouts, error) {
	var statement, lock, idle int64
	const ms = `(extract(epoch FROM current_setting('%s')::interval) * 1000)::bigint`
	err := s.pool.QueryRow(ctx, `SELECT `+fmt.Sprintf(ms, "statement_timeout")+`, `+fmt.Sprintf(ms, "lock_timeout")+`, `+
		fmt.Sprintf(ms, "idle_in_transaction_session_timeout")).Scan(&statement, &lock, &idle)
	if err != nil {
		return SessionTimeouts{}, wrap("reading session timeouts", err)
	}
	return SessionTimeouts{Statement: time.Duration(statement) * time.Millisecond, Lock: time.Duration(lock) * time.Millisecond,
		IdleInTransaction: time.Duration(idle) * time.Millisecond}, nil
}
