package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keyledger/keyledger/phase"
)

// moveInOneMax is the most records moveInOne appends in its one statement
// (13 parameters each, of PostgreSQL's 65535); more go the two round
// trips of writeTx.
const moveInOneMax = 1000

// moveSQL is a Transition as one statement: the compare-and-set of
// moveOperationSQL, and the records appended only when it moved the
// operation (none when it matched nothing), in their order (the stamp
// numbers them as they come), returning the moved operation. The rules
// are the same as for the statements one by one: the records policy
// reads the operation (its namespace is immutable), and the record guard,
// which runs after the move, sees it moved.
func moveSQL(n int) string {
	var b strings.Builder
	b.WriteString(`WITH moved AS (` + moveOperation + `
			RETURNING *)`)
	if n > 0 {
		b.WriteString(`, appended AS (
			INSERT INTO keyledger.records
			  (operation_id, kind, step, target, attempt, uid, resource_version, digest, status, reason, batch, final, detail)
			SELECT m.id, v.kind::keyledger.record_kind, v.step, v.target, v.attempt::integer, v.uid, v.resource_version, v.digest,
			       v.status, v.reason, v.batch::integer, v.final::boolean, v.detail::jsonb
			FROM moved m CROSS JOIN (VALUES `)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "(%d", i)
			for j := range 12 {
				fmt.Fprintf(&b, ", $%d", 7+12*i+j)
			}
			b.WriteString(")")
		}
		b.WriteString(`) AS v(ord, kind, step, target, attempt, uid, resource_version, digest, status, reason, batch, final, detail)
			ORDER BY v.ord)`)
	}
	b.WriteString(`
		SELECT ` + operationColumns + ` FROM moved`)
	return b.String()
}

// moveInOne runs Transition in one round trip: BEGIN, moveSQL and COMMIT
// pipelined, on on (nil: one of the pool's). handled is false when the journal refused the statement:
// which of its parts was refused (the move, or which record) is then
// told by running the same transaction again as writeTx does, statement
// by statement, whose error names it (the refused attempt committed
// nothing). A wait that ran out (a lock or statement timeout) is the
// move's: the operation's row lock is the only one the statement waits
// for, since its records' guard locks the row the move holds.
func (s *Store) moveInOne(ctx context.Context, on *pgxpool.Conn, p TransitionParams) (op *Operation, handled bool, err error) {
	defer phase.Begin("tx")()
	if on == nil {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, true, unreachable("beginning transaction", err)
		}
		defer c.Release()
		on = c
	}
	conn := on.Conn()
	tx := &pipelinedTx{conn: conn}
	defer tx.rollback(ctx)

	args := make([]any, 0, 6+12*len(p.Records))
	args = append(args, p.OperationID, string(p.From), string(p.To), p.Outcome, p.Reason, p.Revision)
	for i := range p.Records {
		args = append(args, recordArgs(&p.Records[i])...)
	}
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue(moveSQL(len(p.Records)), args...)
	b.Queue("COMMIT")
	results := conn.SendBatch(ctx, &b)
	defer results.Close() // a no-op once closed below; on a refusal it reads what is left
	if _, err := results.Exec(); err != nil {
		return nil, true, unreachable("beginning transaction", err)
	}
	op, err = scanOperation(results.QueryRow())
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Nothing moved, nothing appended: the (empty) transaction
		// commits, and is not counted.
		if _, err := results.Exec(); err != nil {
			return nil, true, unreachable("committing transaction", err)
		}
		return nil, true, ErrStateMoved
	case errors.As(err, &pgErr) && !waitedOut(pgErr.Code):
		return nil, false, nil
	case err != nil:
		return nil, true, unreachable(fmt.Sprintf("moving operation %s -> %s", p.From, p.To), err)
	}
	if _, err := results.Exec(); err != nil {
		// The commit may or may not have applied; a rerun reads the journal.
		return nil, true, unreachable("committing transaction", err)
	}
	if err := results.Close(); err != nil {
		return nil, true, unreachable("committing transaction", err)
	}
	s.txs.Add(1)
	return op, true, nil
}

// waitedOut reports whether a SQLSTATE is a wait that ran out (lock,
// statement or idle timeout, a canceled query), not a refusal.
func waitedOut(code string) bool {
	switch code {
	case "55P03", "57014", "25P03", "40P01", "40001":
		return true
	}
	return false
}
