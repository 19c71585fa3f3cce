// Package cause names why a dependency of a run (the journal's PostgreSQL,
// the Kubernetes API server) failed it: a stable kebab-case reason word,
// what fixes it, and whether a rerun alone can. It is the one table every
// such failure is read against; cmd/keyledger/app turns a Cause into the
// exit code (69 before anything durable, 75 after, 77 for a permission
// the identity lacks), and workflow asks it whether an error is a
// dependency's failure at all or a broken invariant of keyledger's own
// (exit 1). docs/failures.md lists every reason.
package cause

import (
	"context"
	"errors"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
)

// The dependencies a Cause names.
const (
	PostgreSQL = "postgresql"
	Kubernetes = "kubernetes"
)

// Cause is why a dependency failed a run.
type Cause struct {
	// Dependency is PostgreSQL or Kubernetes.
	Dependency string
	// Reason is a stable kebab-case word (journal-session-terminated, ...).
	Reason string
	// Fix says what to do. For a failure a rerun cannot fix (Settles false)
	// it names the change to make and never only "run again".
	Fix string
	// Settles is true when the dependency comes back by itself (a restart,
	// a failover, a lock released, a connection slot freed): running the
	// same command again, later, settles the run. False when something
	// must be changed first (a password, a role, a grant, a certificate, a
	// token).
	Settles bool
	// Permission is true when the dependency refused a right the
	// identity lacks (a journal role never granted for the namespace, a
	// forbidden Kubernetes request): exit 77 while nothing durable
	// happened.
	Permission bool
}

// Of returns the Cause of err, and false when err is not a dependency's
// failure keyledger knows (a broken invariant of its own, exit 1).
func Of(err error) (Cause, bool) {
	if err == nil {
		return Cause{}, false
	}
	var ke *kube.Error
	if errors.As(err, &ke) {
		return ofKube(ke)
	}
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		if c, ok := ofSQLState(coded.SQLState()); ok {
			return c, true
		}
		// A server error that is not a dependency's failure (a constraint
		// or trigger of the journal refusing a move, a statement keyledger
		// got wrong) is keyledger's, unless it came while connecting.
		var unreachable *store.UnreachableError
		if !errors.As(err, &unreachable) {
			return Cause{}, false
		}
	}
	var unreadable *store.RecordError
	switch {
	case errors.As(err, &unreadable):
		return journal["journal-record-unreadable"], true
	case errors.Is(err, store.ErrJournalSilent):
		return journal["journal-silent"], true
	case errors.Is(err, store.ErrSessionNotFresh):
		return journal["journal-session-not-fresh"], true
	}
	var conn *store.ConnError
	if errors.As(err, &conn) {
		return journal[connReasons[conn.Class]], true
	}
	var unreachable *store.UnreachableError
	if errors.As(err, &unreachable) {
		if errors.Is(err, context.DeadlineExceeded) {
			return journal["journal-timeout"], true
		}
		return journal["journal-unreachable"], true
	}
	return Cause{}, false
}

// All returns every Cause Of can give, journal first, each once.
func All() []Cause {
	var all []Cause
	for _, reason := range journalOrder {
		all = append(all, journal[reason])
	}
	for _, reason := range kubeOrder {
		all = append(all, kubernetes[reason])
	}
	return all
}

// connReasons maps store.ConnError's classes to reasons.
var connReasons = map[string]string{
	store.ConnRefused:        "journal-connection-refused",
	store.ConnReset:          "journal-connection-lost",
	store.ConnClosed:         "journal-connection-lost",
	store.ConnTimeout:        "journal-timeout",
	store.ConnDNS:            "journal-dns",
	store.ConnTLSServerName:  "journal-tls-server-name",
	store.ConnTLSCertificate: "journal-tls-certificate",
	store.ConnTLS:            "journal-tls",
	store.ConnPoolerNoServer: "journal-pooler-no-server",
}

// ofSQLState reads a PostgreSQL error by its SQLSTATE: the codes listed
// by name first, then their classes.
func ofSQLState(code string) (Cause, bool) {
	if reason, ok := sqlStates[code]; ok {
		return journal[reason], true
	}
	if len(code) == 5 {
		if reason, ok := sqlClasses[code[:2]]; ok {
			return journal[reason], true
		}
	}
	return Cause{}, false
}

// sqlStates are the SQLSTATEs with a reason of their own.
var sqlStates = map[string]string{
	"57P01": "journal-session-terminated", // admin_shutdown: pg_terminate_backend, a fast or smart shutdown, a failover
	"57P02": "journal-server-crashed",     // crash_shutdown: another backend crashed, the server restarts
	"57P03": "journal-not-accepting",      // cannot_connect_now: starting up, shutting down, in recovery
	"57P04": "journal-database-dropped",   // database_dropped
	"57P05": "journal-idle-timeout",       // idle_session_timeout
	"57014": "journal-statement-canceled", // query_canceled: statement_timeout or pg_cancel_backend
	"25P03": "journal-idle-timeout",       // idle_in_transaction_session_timeout
	"25P04": "journal-transaction-timeout",
	"25P02": "journal-transaction-aborted", // in_failed_sql_transaction: an earlier statement of the transaction failed
	"25006": "journal-read-only",           // read_only_sql_transaction: a standby, a -ro Service
	"53300": "journal-too-many-connections",
	"53200": "journal-out-of-memory", // out_of_memory, also "out of shared memory" (the lock table full)
	"55P03": "journal-lock-timeout",  // lock_not_available: lock_timeout, NOWAIT
	"40001": "journal-serialization-failure",
	"40P01": "journal-deadlock",
	"28P01": "journal-login-failed",   // invalid_password (also a role that does not exist, under password auth)
	"28000": "journal-login-rejected", // invalid_authorization_specification: no such role, NOLOGIN, no pg_hba entry
	"3D000": "journal-database-missing",
	"42501": "journal-not-granted", // insufficient_privilege: the role was never granted the namespace, or was revoked
	"3F000": "journal-schema-missing",
	"42P01": "journal-schema-missing",
	"08P01": "journal-protocol-violation",
}

// sqlClasses are the SQLSTATE classes (two characters) whose every code
// not listed above is a dependency's failure.
var sqlClasses = map[string]string{
	"08": "journal-connection-lost",         // connection exception
	"40": "journal-transaction-rolled-back", // transaction rollback
	"53": "journal-insufficient-resources",  // disk full, too many connections, configuration limit
	"57": "journal-session-terminated",      // operator intervention
	"58": "journal-server-error",            // system error (I/O) outside PostgreSQL
	"XX": "journal-server-error",            // PostgreSQL's internal error, data corrupted
}

const (
	rerun       = "run the same command again once PostgreSQL accepts connections"
	cannotRerun = "; a rerun without that change fails the same way"
	urlSetting  = "the database URL (--database-url or KEYLEDGER_DATABASE_URL)"
)

// journal holds the Causes of PostgreSQL's failures, by reason.
var journal = map[string]Cause{}

// journalOrder lists the journal's reasons in the order docs/failures.md
// gives them.
var journalOrder []string

func init() {
	add := func(reason string, settles, permission bool, fix string) {
		journal[reason] = Cause{Dependency: PostgreSQL, Reason: reason, Fix: fix, Settles: settles, Permission: permission}
		journalOrder = append(journalOrder, reason)
	}
	add("journal-connection-refused", true, false, "nothing listens at the journal's address: start PostgreSQL (or its pooler, its Service), then "+rerun)
	add("journal-connection-lost", true, false, "the connection to the journal was lost (a restart, a failover, a network reset): "+rerun)
	add("journal-timeout", true, false, "the journal did not answer in time (connect_timeout 10 s): check the network path and the server's load, then "+rerun)
	add("journal-dns", true, false, "the journal's host name does not resolve: check the host in "+urlSetting+" and the cluster DNS, then "+rerun)
	add("journal-unreachable", true, false, "check that PostgreSQL accepts connections at "+urlSetting+", then "+rerun)
	add("journal-silent", true, false, "the journal stopped answering (the connection open, nothing coming back): check the network path and the server, then "+rerun)
	add("journal-session-terminated", true, false, "PostgreSQL ended the session (pg_terminate_backend, a restart, a failover, a pooler recycling sessions): "+rerun)
	add("journal-server-crashed", true, false, "a PostgreSQL backend crashed and the server is restarting: "+rerun)
	add("journal-not-accepting", true, false, "PostgreSQL is starting up, shutting down or in recovery: "+rerun)
	add("journal-database-dropped", false, false, "the journal's database was dropped: restore it (or create it and run keyledger migrate up as the schema owner)"+cannotRerun)
	add("journal-idle-timeout", true, false, "the server ended a session left idle past its timeout (KEYLEDGER_DB_IDLE_IN_TRANSACTION_TIMEOUT, idle_session_timeout): "+rerun)
	add("journal-statement-canceled", true, false, "a journal statement was canceled (its statement timeout, KEYLEDGER_DB_STATEMENT_TIMEOUT, or pg_cancel_backend): "+rerun)
	add("journal-transaction-timeout", true, false, "the server ended a transaction past its transaction_timeout: "+rerun)
	add("journal-transaction-aborted", true, false, "a statement of the journal transaction failed before this one (a timeout, a lost lock): "+rerun)
	add("journal-read-only", true, false, "the journal session is read-only (a standby, a -ro Service, a failover in progress): point "+urlSetting+" at the primary (CloudNativePG: the -rw Service), then "+rerun)
	add("journal-too-many-connections", true, false, "PostgreSQL refused the session: max_connections is reached. Wait for sessions to end, or raise max_connections or put a session pooler in front (deploy/README.md), then "+rerun)
	add("journal-pooler-no-server", true, false, "the session pooler could not open a server session for this role (PostgreSQL refused it, often at max_connections, or is down; PgBouncer waits server_login_retry before it tries again): set the pooler's max_db_connections below max_connections (deploy/README.md), then "+rerun)
	add("journal-out-of-memory", true, false, "PostgreSQL ran out of memory or of lock table slots (max_locks_per_transaction): "+rerun+"; if it repeats, raise the server's memory or max_locks_per_transaction")
	add("journal-insufficient-resources", true, false, "PostgreSQL ran out of a resource (disk space, a configured limit): free it, then "+rerun)
	add("journal-lock-timeout", true, false, "a journal row or run lock held by another session was not released within the lock timeout (KEYLEDGER_DB_LOCK_TIMEOUT): "+rerun)
	add("journal-serialization-failure", true, false, "a journal transaction conflicted with a concurrent one: "+rerun)
	add("journal-deadlock", true, false, "PostgreSQL broke a deadlock between journal sessions by ending this one's transaction: "+rerun)
	add("journal-transaction-rolled-back", true, false, "PostgreSQL rolled the journal transaction back: "+rerun)
	add("journal-server-error", true, false, "PostgreSQL failed internally (an I/O error, an internal error): check the server's log, then "+rerun)
	add("journal-protocol-violation", false, false, "the journal's server broke the wire protocol: check what listens at "+urlSetting+" (a pooler in transaction mode is not supported: session mode only)"+cannotRerun)
	add("journal-login-failed", false, false, "PostgreSQL refused the password: set the namespace role's current password in "+urlSetting+" (under password authentication a role that does not exist is refused the same way: create it, keyledger journal grant ROLE NAMESPACE as the schema owner)"+cannotRerun)
	add("journal-login-rejected", false, false, "PostgreSQL rejected the login: the role does not exist, may not log in (NOLOGIN) or no pg_hba.conf entry admits it; create the role with LOGIN and grant it (keyledger journal grant ROLE NAMESPACE as the schema owner)"+cannotRerun)
	add("journal-database-missing", false, false, "the database named in "+urlSetting+" does not exist: correct the URL, or create the database and run keyledger migrate up as the schema owner"+cannotRerun)
	add("journal-schema-missing", false, false, "the journal's schema is not in that database: run keyledger migrate up as the schema owner, or correct the database in "+urlSetting+cannotRerun)
	add("journal-not-granted", false, true, "the journal role was never granted this namespace (or was revoked): as the schema owner run keyledger journal grant ROLE NAMESPACE"+cannotRerun)
	add("journal-tls-server-name", false, false, "the journal's certificate does not name the host in "+urlSetting+": connect by a name the certificate holds (CloudNativePG: CLUSTER-rw, CLUSTER-rw.NAMESPACE, CLUSTER-rw.NAMESPACE.svc)"+cannotRerun)
	add("journal-tls-certificate", false, false, "the journal's certificate is not trusted: set sslrootcert in "+urlSetting+" to the CA that signed it (refresh the copy after the CA rotates)"+cannotRerun)
	add("journal-tls", false, false, "the TLS handshake with the journal failed: check sslmode in "+urlSetting+" and that the server (or its pooler) speaks TLS"+cannotRerun)
	add("journal-session-not-fresh", false, false, "a pooler handed on a session it did not reset: run it in session mode with server_reset_query = DISCARD ALL (deploy/journal/pooler)"+cannotRerun)
	add("journal-record-unreadable", false, false, "a record of this operation was written around keyledger (the message names it: its target or its detail is not one keyledger writes) and keyledger acts on no record it cannot read, so it never resumes this operation: find who wrote it with the namespace's journal role (records are append-only: it stays as evidence), and run the command under a new mutationId"+cannotRerun)
}
