package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keyledger/keyledger/phase"
)

// A keyledger process is one-shot: every run opens a new session, so no
// statement it sends has been prepared before. pgx's default exec mode
// (QueryExecModeCacheStatement) spends a round trip preparing (Parse,
// Describe) each new SQL text before it runs it, once per process for
// every statement of a run. oneShot sends every statement in one round
// trip instead (QueryExecModeExec: Parse, Bind and Execute together, the
// server inferring each parameter's type from the statement, text-format
// values both ways), and reads timestamptz in the process's location, as
// the binary format did, so that no time read back changes its form.
// A batch that repeats one statement many times prepares it first
// (prepareForBatch): there one Describe round trip is cheaper than
// parsing each copy.
// Every connection starts its session first (startSession: the
// timeouts, and the check that it is fresh).
func oneShot(cfg *pgxpool.Config, timeouts SessionTimeouts) {
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		conn.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.Local}})
		return startSession(ctx, conn, timeouts)
	}
}

// batchPrepareMin is the number of copies of one statement in a batch
// from which prepareForBatch prepares it.
const batchPrepareMin = 8

// prepareForBatch prepares sql on conn (once per session, under its own
// text as the name, which the batch then finds) when a batch is about to
// send it n times.
func prepareForBatch(ctx context.Context, conn *pgx.Conn, sql string, n int) error {
	if n < batchPrepareMin {
		return nil
	}
	_, err := conn.Prepare(ctx, sql, sql)
	return err
}

// writeTx runs one write transaction of the journal in two round trips:
// BEGIN pipelined with its head statement (an operation's insert or
// move, queued by queueHead), whose answer readHead reads and turns into
// the records to append to an operation (none, or an error, ends the
// transaction), then those records pipelined with COMMIT. It is the same
// transaction, statement for statement, as BEGIN, the head, each insert
// and COMMIT sent one by one; what is not sent on (a failed head, a
// failed insert, whose batch skips the rest) is rolled back. on is the
// connection to use (nil: one of the pool's).
func (s *Store) writeTx(ctx context.Context, on *pgxpool.Conn, queueHead func(*pgx.Batch),
	readHead func(ctx context.Context, in rowQuerier, head pgx.Row) (opID int64, records []Record, err error)) error {
	defer phase.Begin("tx")()
	if on == nil {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return unreachable("beginning transaction", err)
		}
		defer c.Release()
		on = c
	}
	conn := on.Conn()
	tx := &pipelinedTx{conn: conn}
	defer tx.rollback(ctx)

	var head pgx.Batch
	head.Queue("BEGIN")
	queueHead(&head)
	results := conn.SendBatch(ctx, &head)
	if _, err := results.Exec(); err != nil {
		_ = results.Close()
		return unreachable("beginning transaction", err)
	}
	rest := &afterBatch{results: results, conn: conn}
	opID, records, err := readHead(ctx, rest, results.QueryRow())
	if closeErr := rest.close(); err == nil && closeErr != nil {
		err = unreachable("reading the transaction's first statement", closeErr)
	}
	if err != nil {
		return err
	}

	if err := prepareForBatch(ctx, conn, insertRecordSQL, len(records)); err != nil {
		return unreachable("appending records", err)
	}
	var tail pgx.Batch
	queueRecords(&tail, opID, records)
	tail.Queue("COMMIT")
	results = conn.SendBatch(ctx, &tail)
	if err := readRecords(results, records); err != nil {
		_ = results.Close()
		return err
	}
	if _, err := results.Exec(); err != nil {
		_ = results.Close()
		// The commit may or may not have applied; a rerun reads the journal.
		return unreachable("committing transaction", err)
	}
	if err := results.Close(); err != nil {
		return unreachable("committing transaction", err)
	}
	s.txs.Add(1)
	return nil
}

// rowQuerier is what a transaction and a connection share: readHead may
// send further statements in the transaction through it.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// afterBatch sends statements on conn once the batch whose results are
// being read is done with: the connection serves one at a time.
type afterBatch struct {
	results  pgx.BatchResults
	closeErr error
	conn     *pgx.Conn
}

func (a *afterBatch) close() error {
	if a.results != nil {
		a.closeErr, a.results = a.results.Close(), nil
	}
	return a.closeErr
}

func (a *afterBatch) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	_ = a.close() // a failed batch fails the statement too
	return a.conn.QueryRow(ctx, sql, args...)
}

// pipelinedTx is the transaction writeTx began: BEGIN and COMMIT are
// writeTx's own.
type pipelinedTx struct{ conn *pgx.Conn }

// rollback ends the transaction if it is still open (a failure left it
// there): as pgx.Tx's deferred Rollback, a no-op after COMMIT. A
// connection whose rollback fails is closed, and the pool drops it.
func (t *pipelinedTx) rollback(ctx context.Context) {
	if t.conn.IsClosed() || t.conn.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if _, err := t.conn.Exec(ctx, "ROLLBACK"); err != nil {
		_ = t.conn.Close(ctx)
	}
}
