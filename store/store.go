package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keyledger/keyledger/phase"
)

var (
	// ErrNotFound is returned when no operation has the requested mutation ID.
	ErrNotFound = errors.New("operation not found")
	// ErrStateMoved is returned by Transition when the operation is no longer
	// in the expected state: another process moved it first.
	ErrStateMoved = errors.New("operation state moved concurrently")
	// ErrDigestMismatch is returned by Prepare when the mutation ID is already
	// journaled for a different command.
	ErrDigestMismatch = errors.New("mutation ID already used by a different command")
	// ErrInvalidURL is returned when the database URL cannot be parsed. The
	// URL itself is never part of an error: it may hold a password.
	ErrInvalidURL = errors.New("database URL is not valid")
)

// Store is an open journal.
type Store struct {
	pool *pgxpool.Pool
	txs  atomic.Int64
	// driver is the connection whose session holds the live locks of the
	// runs this process drives (PrepareRun, runLive), from the first
	// PrepareRun to Close; their moves are committed on it (onRunConn).
	driver struct {
		mu   sync.Mutex
		conn *pgxpool.Conn
	}
}

// CheckURL reports ErrInvalidURL when databaseURL cannot be parsed, without
// connecting anywhere.
func CheckURL(databaseURL string) error {
	if _, err := pgxpool.ParseConfig(databaseURL); err != nil {
		return ErrInvalidURL
	}
	return nil
}

// Open connects to the journal database. The URL never appears in errors.
// Every session is held to the session timeouts (SessionTimeouts; a
// setting that is not valid is a *SettingError, before anything connects).
func Open(ctx context.Context, databaseURL string) (*Store, error) {
	timeouts, err := sessionTimeouts()
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, ErrInvalidURL
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	oneShot(cfg, timeouts)
	boundSilence(&cfg.ConnConfig.Config, answerBound(timeouts))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, wrap("opening database pool", err)
	}
	// The pool connects lazily: one connection is opened (and its session
	// authenticated) now, so an unreachable journal is told apart here, and
	// left idle for the first transaction. (A ping would add a round trip
	// to a connection that has just proved itself.)
	conn, err := pool.Acquire(ctx)
	if errors.Is(err, ErrSessionNotFresh) {
		pool.Close()
		return nil, ErrSessionNotFresh
	}
	if err != nil {
		pool.Close()
		return nil, &UnreachableError{Err: redact(err)}
	}
	conn.Release()
	return &Store{pool: pool}, nil
}

// Close releases all connections.
func (s *Store) Close() {
	defer phase.Begin("journal close")()
	s.driver.mu.Lock()
	if s.driver.conn != nil {
		// The run locks are released before Close returns: a closed
		// socket ends the session only when the server notices, and until
		// then the next process would see the runs as live. (A crash
		// still releases them as its session ends.) Then back in the
		// pool, which closes it.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = s.driver.conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
		cancel()
		s.driver.conn.Release()
		s.driver.conn = nil
	}
	s.driver.mu.Unlock()
	s.pool.Close()
}

// Transactions is the number of transactions this Store has committed.
func (s *Store) Transactions() int64 { return s.txs.Load() }

// Sessions is the number of sessions (connections) this Store has opened.
func (s *Store) Sessions() int64 { return s.pool.Stat().NewConnsCount() }

// UnreachableError means PostgreSQL could not be reached at all.
type UnreachableError struct{ Err error }

func (e *UnreachableError) Error() string { return "database unreachable: " + e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

// redact keeps what kind of failure happened but drops connection strings,
// host names, addresses and user names that pgconn and net put in their
// messages: a server error keeps its SQLSTATE (and the constraint it names,
// a schema name), a canceled or timed-out context stays recognisable, an error
// keyledger made itself (localError) is kept, and anything else, which may
// carry connection details, becomes "connection failed".
func redact(err error) error {
	if err == nil {
		return nil
	}
	var local *localError
	if errors.As(err, &local) {
		return err
	}
	// A journal that stopped answering (boundSilence) says only that.
	var silent *silentError
	if errors.As(err, &silent) {
		return silent
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if poolerNoServer(pgErr.Code, pgErr.Message) {
			return &ConnError{Class: ConnPoolerNoServer}
		}
		if pgErr.ConstraintName != "" {
			return &serverError{code: pgErr.Code, text: fmt.Sprintf("server error %s (%s) on %s", pgErr.Code, pgErr.Severity, pgErr.ConstraintName)}
		}
		return &serverError{code: pgErr.Code, text: fmt.Sprintf("server error %s (%s)", pgErr.Code, pgErr.Severity)}
	}
	// A context that ended stays recognisable (errors.Is), but only as
	// itself: the message around it names the user, database and address.
	if errors.Is(err, context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	if errors.Is(err, context.Canceled) {
		return context.Canceled
	}
	return connFailure(err)
}

// serverError is a redacted PostgreSQL error: its SQLSTATE and nothing the
// server wrote.
type serverError struct{ code, text string }

func (e *serverError) Error() string { return e.text }

// SQLState returns the redacted error's SQLSTATE code.
func (e *serverError) SQLState() string { return e.code }

// RecordError is a journal record keyledger cannot read back: a row
// written around keyledger (by a role that may append to the namespace's
// journal) whose target is not "<kind>/<name>" or whose detail is not an
// object. keyledger acts on no record it cannot read: the run stops, and
// the error names the record, never its text.
type RecordError struct {
	ID    int64
	Field string // "target" or "detail"
	Err   error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("decoding record %d %s: %v", e.ID, e.Field, e.Err)
}
func (e *RecordError) Unwrap() error { return e.Err }

// localError marks an error keyledger made itself (decoding, validation):
// it holds no connection detail and passes redact unchanged.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// unreachable is wrap for a statement of a write that may have failed on
// the way to the database (a transaction could not begin, the connection
// was lost under a pipelined batch): an UnreachableError unless the server
// answered or the context ended.
func unreachable(what string, err error) error {
	r := redact(err)
	var server *serverError
	if errors.As(r, &server) || errors.Is(r, context.Canceled) || errors.Is(r, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", what, r)
	}
	return &UnreachableError{Err: fmt.Errorf("%s: %w", what, r)}
}

// wrap describes what was being done and redacts err.
func wrap(what string, err error) error { return fmt.Errorf("%s: %w", what, redact(err)) }

// Operation is one journaled operation.
type Operation struct {
	ID            int64
	Kind          string
	MutationID    string
	RequestID     string
	CommandDigest string
	Namespace     string
	Name          string
	ExpectedUID   string
	State         State
	// Revision counts the updates of the operation row; every Transition
	// is a compare-and-set on it.
	Revision    int64
	Outcome     string
	Reason      string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	FinalizedAt *time.Time
}

// Record is one append-only journal entry. Detail holds content-free facts
// (names, counts, digests); it must never hold secret material.
type Record struct {
	ID   int64
	Kind RecordKind
	Step string
	// Target names the object a call acts on (for example the Secret
	// shop-orders-cache-app, journaled as "secret/shop-orders-cache-app")
	// when one step acts on several; the zero Target is none. Its
	// namespace is always the operation's (see Target).
	Target          Target
	Attempt         int
	UID             string
	ResourceVersion string
	Digest          string
	Status          Status
	Reason          Reason
	// Batch and Final are an authority_call's control data: the batch of
	// calls it was sent in (numbered from 1 within the operation) and
	// whether it is the operation's last call. Other kinds carry neither.
	Batch     int
	Final     bool
	Detail    Detail
	CreatedAt time.Time
}

// PrepareParams describe a new operation.
type PrepareParams struct {
	Kind          string
	MutationID    string
	RequestID     string
	CommandDigest string
	Namespace     string
	Name          string
	ExpectedUID   string
	// Detail goes into the preparation record (for example planned names).
	Detail Detail
	// Bound bounds an unfinished run of a desired-state command
	// (PrepareRun only).
	Bound RunBound
}

const operationColumns = `id, kind, mutation_id, request_id, command_digest, target_namespace, target_name,
	expected_uid, state, revision, coalesce(outcome, ''), coalesce(reason, ''), created_at, updated_at, finalized_at`

func scanOperation(row pgx.Row) (*Operation, error) {
	var op Operation
	var state string
	err := row.Scan(&op.ID, &op.Kind, &op.MutationID, &op.RequestID, &op.CommandDigest, &op.Namespace, &op.Name,
		&op.ExpectedUID, &state, &op.Revision, &op.Outcome, &op.Reason, &op.CreatedAt, &op.UpdatedAt, &op.FinalizedAt)
	if err != nil {
		return nil, err
	}
	op.State = State(state)
	return &op, nil
}

// Prepare journals a new operation with its preparation record, in one
// transaction. When the mutation ID is already journaled with the same
// command digest and kind it returns that operation and created=false, so the
// caller resumes from its recorded state; a different digest is
// ErrDigestMismatch. Mutation IDs are unique within a namespace
// (migration 12): another namespace's operations never collide with, and
// are never revealed by, this one's (docs/tenancy.md).
func (s *Store) Prepare(ctx context.Context, p PrepareParams) (op *Operation, created bool, err error) {
	defer phase.Begin("tx prepare")()
	err = s.writeTx(ctx, nil, func(b *pgx.Batch) { queuePrepare(b, p) }, func(ctx context.Context, in rowQuerier, head pgx.Row) (int64, []Record, error) {
		op, created, err = readPrepare(ctx, in, p, head)
		if err != nil || !created {
			return 0, nil, err
		}
		return op.ID, []Record{preparationRecord(p)}, nil
	})
	if err != nil {
		return nil, false, err
	}
	return op, created, nil
}

// prepareIn is Prepare inside the caller's transaction.
func prepareIn(ctx context.Context, tx pgx.Tx, p PrepareParams) (op *Operation, created bool, err error) {
	var b pgx.Batch
	queuePrepare(&b, p)
	q := b.QueuedQueries[0]
	op, created, err = readPrepare(ctx, tx, p, tx.QueryRow(ctx, q.SQL, q.Arguments...))
	if err != nil || !created {
		return op, created, err
	}
	return op, true, insertRecords(ctx, tx, op.ID, []Record{preparationRecord(p)})
}

// insertOperationSQL journals a new operation, or nothing when its
// mutation ID is taken.
const insertOperationSQL = `
		INSERT INTO keyledger.operations
		  (kind, mutation_id, request_id, command_digest, target_namespace, target_name, expected_uid)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (target_namespace, mutation_id) DO NOTHING
		RETURNING ` + operationColumns

// queuePrepare queues the insert of p's operation.
func queuePrepare(b *pgx.Batch, p PrepareParams) {
	b.Queue(insertOperationSQL, p.Kind, p.MutationID, p.RequestID, p.CommandDigest, p.Namespace, p.Name, p.ExpectedUID)
}

// preparationRecord is the record a new operation is prepared with.
func preparationRecord(p PrepareParams) Record {
	return Record{Kind: RecordPreparation, Step: string(RecordPreparation), Digest: p.CommandDigest, UID: p.ExpectedUID, Detail: p.Detail}
}

// readPrepare reads the answer to queuePrepare's insert: the new
// operation (created), or, when its mutation ID was taken, the operation
// journaled under it (read in tx), if it is the same command.
func readPrepare(ctx context.Context, tx rowQuerier, p PrepareParams, inserted pgx.Row) (op *Operation, created bool, err error) {
	op, err = scanOperation(inserted)
	switch {
	case err == nil:
		return op, true, nil
	case errors.Is(err, pgx.ErrNoRows):
		op, err = scanOperation(tx.QueryRow(ctx, operationInQuery, p.MutationID, p.Namespace))
		if errors.Is(err, pgx.ErrNoRows) {
			// Mutation IDs are unique within a namespace (migration 12),
			// and a role inserts only into namespaces it may read: the
			// operation that took the ID is this role's to see, unless it
			// was revoked the namespace between the insert and this read.
			return nil, false, ErrDigestMismatch
		}
		if err != nil {
			return nil, false, wrap("reading journaled operation", err)
		}
		if op.CommandDigest != p.CommandDigest || op.Kind != p.Kind {
			return nil, false, ErrDigestMismatch
		}
		return op, false, nil
	default:
		return nil, false, unreachable("inserting operation", err)
	}
}

// TransitionParams move an operation from one state to another (or keep it,
// when From == To) and append the records that justify the move.
type TransitionParams struct {
	OperationID int64
	From, To    State
	// Revision is the operation's revision as the caller last saw it.
	Revision int64
	Records  []Record
	// Outcome and Reason are required when To is terminal.
	Outcome string
	Reason  string
}

// Transition commits a state move and its records in one transaction. The move
// is a compare-and-set on state and revision: ErrStateMoved when the
// operation is not in From at Revision, that is when any other process has
// moved it or appended to it since the caller's view (even if the state has
// come back to From since).
func (s *Store) Transition(ctx context.Context, p TransitionParams) (*Operation, error) {
	if p.To.Terminal() && p.Outcome == "" {
		return nil, &localError{fmt.Errorf("transition to %s needs an outcome", p.To)}
	}
	for _, r := range p.Records {
		if _, err := r.Target.Journaled(""); err != nil {
			return nil, &localError{fmt.Errorf("appending %s record: %w", r.Kind, err)}
		}
	}
	defer phase.Begin("tx " + string(p.From) + "->" + string(p.To))()
	var op *Operation
	err := s.onRunConn(func(on *pgxpool.Conn) error {
		// One statement for any number of records (moveSQL takes them as
		// arrays); only a refused move runs again statement by statement.
		var handled bool
		var err error
		if op, handled, err = s.moveInOne(ctx, on, p); handled {
			return err
		}
		return s.writeTx(ctx, on, func(b *pgx.Batch) {
			b.Queue(moveOperationSQL, p.OperationID, string(p.From), string(p.To), p.Outcome, p.Reason, p.Revision)
		}, func(_ context.Context, _ rowQuerier, head pgx.Row) (int64, []Record, error) {
			var err error
			op, err = scanOperation(head)
			if errors.Is(err, pgx.ErrNoRows) {
				return 0, nil, ErrStateMoved
			}
			if err != nil {
				return 0, nil, unreachable(fmt.Sprintf("moving operation %s -> %s", p.From, p.To), err)
			}
			return p.OperationID, p.Records, nil
		})
	})
	if err != nil {
		return nil, err
	}
	return op, nil
}

// moveOperation is Transition's compare-and-set, which moveOperationSQL
// and moveSQL both send.
const moveOperation = `
			UPDATE keyledger.operations
			SET state = $3,
			    outcome = nullif($4, ''),
			    reason = nullif($5, '')
			WHERE id = $1 AND state = $2 AND revision = $6`

// moveOperationSQL is the compare-and-set alone, returning the operation.
const moveOperationSQL = moveOperation + `
			RETURNING ` + operationColumns

// insertRecordSQL appends one record.
const insertRecordSQL = `
			INSERT INTO keyledger.records
			  (operation_id, kind, step, target, attempt, uid, resource_version, digest, status, reason, batch, final, detail)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`

// queueRecords queues the inserts of records, in order.
func queueRecords(b *pgx.Batch, opID int64, records []Record) {
	for i := range records {
		b.Queue(insertRecordSQL, append([]any{opID}, recordArgs(&records[i])...)...)
	}
}

// recordArgs are r's twelve column values after operation_id, in
// insertRecordSQL's order (moveSQL takes them as arrays, in the same
// order: columnsOf): attempt and batch as counted, and the detail as
// text, whose column type (jsonb) decides how the server reads it,
// whether the statement was prepared or not.
func recordArgs(r *Record) []any {
	attempt, batch := r.counted()
	return []any{string(r.Kind), r.Step, r.Target.String(), attempt, r.UID, r.ResourceVersion, r.Digest, string(r.Status), string(r.Reason),
		batch, r.Final, string(r.Detail.JSON())}
}

// readRecords reads the answers to queueRecords' inserts: the first that
// failed fails the batch (and the transaction) with its error.
func readRecords(results pgx.BatchResults, records []Record) error {
	for i := range records {
		if _, err := results.Exec(); err != nil {
			return unreachable(fmt.Sprintf("appending %s record", records[i].Kind), err)
		}
	}
	return nil
}

// counted is r's attempt, NULL (nil) when not counted, and its batch,
// only on a call.
func (r *Record) counted() (attempt, batch *int) {
	if r.Attempt > 0 {
		attempt = &r.Attempt
	}
	if r.Kind == RecordAuthorityCall {
		batch = &r.Batch
	}
	return attempt, batch
}

// insertRecords appends records in order, as one pipelined batch: one
// round trip for all of them instead of one each. The statements run in
// the transaction in the same order as one by one; the first that fails
// fails the batch (and the transaction) with the same error.
func insertRecords(ctx context.Context, tx pgx.Tx, opID int64, records []Record) error {
	if len(records) == 0 {
		return nil
	}
	if err := prepareForBatch(ctx, tx.Conn(), insertRecordSQL, len(records)); err != nil {
		return wrap("appending records", err)
	}
	var b pgx.Batch
	queueRecords(&b, opID, records)
	results := tx.SendBatch(ctx, &b)
	if err := readRecords(results, records); err != nil {
		_ = results.Close()
		return err
	}
	if err := results.Close(); err != nil {
		return wrap("appending records", err)
	}
	return nil
}

// operationInQuery reads the operation journaled under mutation ID $1 in
// namespace $2 (every namespace the role may read when $2 is empty: then
// up to two rows, so that an ID journaled in two namespaces is ambiguous,
// never one picked by chance).
const operationInQuery = `SELECT ` + operationColumns + ` FROM keyledger.operations
	WHERE mutation_id = $1 AND ($2 = '' OR target_namespace = $2) ORDER BY id LIMIT 2`

// ReasonMutationIDAmbiguous: a mutation ID asked for without a namespace
// is journaled in more than one namespace the role may read (exit 64).
const ReasonMutationIDAmbiguous = "mutation-id-ambiguous"

// loadIn reads the operation journaled under id in namespace ns (any
// readable namespace when ns is empty): ErrNotFound when there is none,
// a PreconditionError (ReasonMutationIDAmbiguous) when ns is empty and
// two namespaces hold id.
func loadIn(ctx context.Context, q rowsQuerier, ns, id string) (*Operation, error) {
	rows, err := q.Query(ctx, operationInQuery, id, ns)
	if err != nil {
		return nil, wrap("loading operation", err)
	}
	ops, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Operation, error) { return scanOperation(row) })
	switch {
	case err != nil:
		return nil, wrap("loading operation", err)
	case len(ops) == 0:
		return nil, ErrNotFound
	case len(ops) > 1:
		return nil, &PreconditionError{Reason: ReasonMutationIDAmbiguous,
			Msg: fmt.Sprintf("mutation ID %q is journaled in more than one namespace", id),
			Fix: "name the namespace (--namespace)"}
	}
	return ops[0], nil
}

// rowsQuerier is what loadIn reads through: the pool or a transaction.
type rowsQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Load returns the operation with the given mutation ID in namespace ns
// (any namespace the role may read when ns is empty), or ErrNotFound.
func (s *Store) Load(ctx context.Context, ns, mutationID string) (*Operation, error) {
	return loadIn(ctx, s.pool, ns, mutationID)
}

// Snapshot reads an operation of namespace ns (any the role may read when
// empty) and its records as one consistent view (one repeatable-read
// transaction): the records are exactly those that led to the state read,
// even while other processes move the operation.
func (s *Store) Snapshot(ctx context.Context, ns, mutationID string) (*Operation, []Record, error) {
	defer phase.Begin("tx snapshot")()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, nil, unreachable("beginning snapshot", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	op, err := loadIn(ctx, tx, ns, mutationID)
	if err != nil {
		return nil, nil, err
	}
	records, err := queryRecords(ctx, tx, op.ID)
	if err != nil {
		return nil, nil, err
	}
	return op, records, nil
}

// Records returns an operation's records in the order they were appended.
func (s *Store) Records(ctx context.Context, operationID int64) ([]Record, error) {
	return queryRecords(ctx, s.pool, operationID)
}

// querier is what a pool and a transaction share.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func queryRecords(ctx context.Context, q querier, operationID int64) ([]Record, error) {
	rows, err := q.Query(ctx, recordsQuery, operationID)
	if err != nil {
		return nil, wrap("reading records", err)
	}
	records, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Record, error) {
		var ns string
		return scanRecord(row, &ns, &ns)
	})
	if err != nil {
		return nil, wrap("reading records", err)
	}
	return records, nil
}

// recordsQuery reads operation $1's records in append order, each after
// the operation's namespace (read once), which their targets are in.
const recordsQuery = `SELECT coalesce((SELECT o.target_namespace FROM keyledger.operations o WHERE o.id = $1), ''), ` +
	recordColumns + ` FROM keyledger.records WHERE operation_id = $1 ORDER BY id`

// recordColumns are the columns scanRecord reads, in its order.
const recordColumns = `id, kind, step, target, coalesce(attempt, 0), uid, resource_version, digest, status, reason,
	coalesce(batch, 0), final, detail, created_at`

// scanRecord reads one record selected with recordColumns, after any
// columns in before, its target in *ns once the row is read: the
// namespace of the record's operation, which the caller either asked for
// (the query keeps to it) or reads in before.
func scanRecord(row pgx.Row, ns *string, before ...any) (Record, error) {
	var r Record
	var kind, target string
	var raw []byte
	dest := append(slices.Clip(before), &r.ID, &kind, &r.Step, &target, &r.Attempt, &r.UID, &r.ResourceVersion, &r.Digest, &r.Status,
		&r.Reason, &r.Batch, &r.Final, &raw, &r.CreatedAt)
	if err := row.Scan(dest...); err != nil {
		return r, err
	}
	r.Kind = RecordKind(kind)
	var err error
	if r.Target, err = parseTarget(*ns, target); err != nil {
		return r, &localError{&RecordError{ID: r.ID, Field: "target", Err: err}}
	}
	if r.Detail, err = ParseDetail(raw); err != nil {
		return r, &localError{&RecordError{ID: r.ID, Field: "detail", Err: err}}
	}
	return r, nil
}

// ListParams filter List.
type ListParams struct {
	// Limit caps the number of operations returned (newest first); 0 means 100.
	Limit int
}

// listQuery is List's SQL: the $1 newest operations the role may see.
// The schema owner sees every operation: the newest through
// operations_created_at. A namespace role sees those of the namespaces it
// was granted: the newest of each granted namespace
// (keyledger.newest_in_namespace, through operations_namespace_created,
// migration 8), merged, so that its page costs the same whatever other
// namespaces hold. Row-level security still decides every row either
// branch reads; the branches exclude each other (a role that is the
// owner's, or granted nothing, reads one or none).
const listQuery = `SELECT ` + operationColumns + ` FROM (
	(SELECT * FROM keyledger.operations WHERE (SELECT keyledger.acting_as_owner())
	  ORDER BY created_at DESC, id DESC LIMIT $1)
	UNION ALL
	(SELECT o.* FROM keyledger.namespace_grants g CROSS JOIN LATERAL keyledger.newest_in_namespace(g.namespace, $1) o
	  WHERE g.role = current_user AND NOT (SELECT keyledger.acting_as_owner()))
) l ORDER BY created_at DESC, id DESC LIMIT $1`

// NamespacePageSQL is the query keyledger.newest_in_namespace runs ($1 the
// namespace, $2 the page size), and the setting it runs with, for EXPLAIN.
const NamespacePageSQL = `SELECT * FROM keyledger.operations o WHERE o.target_namespace = $1 ORDER BY o.created_at DESC, o.id DESC LIMIT $2`

// NamespacePageSetting is the planner setting newest_in_namespace sets.
const NamespacePageSetting = "enable_incremental_sort = off"

// List returns the newest operations first.
func (s *Store) List(ctx context.Context, p ListParams) ([]*Operation, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	rows, err := s.pool.Query(ctx, listQuery, p.Limit)
	if err != nil {
		return nil, wrap("listing operations", err)
	}
	ops, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Operation, error) { return scanOperation(row) })
	if err != nil {
		return nil, wrap("listing operations", err)
	}
	return ops, nil
}

func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.inTxOn(ctx, s.pool, fn)
}

// onRunConn runs fn on the run driver's connection once PrepareRun took
// one, else with nil (writeTx then takes one of the pool's): a run's moves
// then go on the session that prepared it, which is open and has run the
// journal's statements already, instead of making the pool open a second
// session (a connect, its authentication and its first statements'
// planning) on the run's way to its first call.
func (s *Store) onRunConn(fn func(on *pgxpool.Conn) error) error {
	s.driver.mu.Lock()
	defer s.driver.mu.Unlock()
	if s.driver.conn == nil {
		return fn(nil)
	}
	err := fn(s.driver.conn)
	if s.driver.conn.Conn().IsClosed() {
		// The session ended (its run locks with it): the next PrepareRun
		// drives on a new one, and moves go on the pool until then.
		s.driver.conn.Release()
		s.driver.conn = nil
	}
	return err
}

// reader is what a pool and one of its connections share for reading.
type reader interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// onReadConn runs fn (which reads, and closes every rows it opens) on the
// run driver's connection when PrepareRun took one and no move is using
// it, else on the pool. A desired-state run holds its driver session for
// its whole life (its run locks), so the pool's next connection would be a
// second session: a connect, its authentication, and its first
// statements' planning, for the questions a decision asks between moves
// (a rerun's proofs). A read never waits for a move: one in progress sends
// it to the pool.
func (s *Store) onReadConn(fn func(q reader) error) error {
	if s.driver.mu.TryLock() {
		if c := s.driver.conn; c != nil {
			defer s.driver.mu.Unlock()
			err := fn(c)
			if c.Conn().IsClosed() {
				c.Release()
				s.driver.conn = nil
			}
			return err
		}
		s.driver.mu.Unlock()
	}
	return fn(s.pool)
}

// beginner is what a pool and one of its connections share.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// inTxOn runs fn in a transaction of on (the pool, or one connection).
func (s *Store) inTxOn(ctx context.Context, on beginner, fn func(pgx.Tx) error) error {
	defer phase.Begin("tx")()
	tx, err := on.Begin(ctx)
	if err != nil {
		return unreachable("beginning transaction", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		// The commit may or may not have applied; a rerun reads the journal.
		return unreachable("committing transaction", err)
	}
	s.txs.Add(1)
	return nil
}
