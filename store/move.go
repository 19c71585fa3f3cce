package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keyledger/keyledger/phase"
)

// moveSQL is a Transition as one statement: the compare-and-set of
// moveOperationSQL, and the records appended only when it moved the
// operation (none when it matched nothing), in their order (the stamp
// numbers them as they come), returning the moved operation. The rules
// are the same as for the statements one by one: the records policy
// reads the operation (its namespace is immutable), and the record guard,
// which runs after the move, sees it moved.
//
// The records travel as one array per column ($7 to $18, in recordArgs'
// order), so that the text is the same for any number of records: a run
// makes several moves (a retirement two, a versioned update six, a
// credential plan of 64 Secrets seven), and one text is parsed and
// planned once per session (moveInOne prepares it, and plans it
// generically) where one text per number of records was parsed and
// planned again for each move.
const moveSQL = `WITH moved AS (` + moveOperation + `
			RETURNING *),
		appended AS (
			INSERT INTO keyledger.records
			  (operation_id, kind, step, target, attempt, uid, resource_version, digest, status, reason, batch, final, detail)
			SELECT m.id, v.kind::keyledger.record_kind, v.step, v.target, v.attempt::integer, v.uid, v.resource_version, v.digest,
			       v.status, v.reason, v.batch::integer, v.final, v.detail::jsonb
			FROM moved m CROSS JOIN unnest($7::text[], $8::text[], $9::text[], $10::bigint[], $11::text[], $12::text[],
			       $13::text[], $14::text[], $15::text[], $16::bigint[], $17::boolean[], $18::text[])
			  WITH ORDINALITY AS v(kind, step, target, attempt, uid, resource_version, digest, status, reason, batch, final, detail, ord)
			ORDER BY v.ord)
		SELECT ` + operationColumns + ` FROM moved`

// genericPlan makes the transaction's statements use their generic plan
// at once: moveSQL's plan does not depend on its parameters (the
// operation by its primary key, the records from the arrays), and without
// it the server plans a prepared statement again, for its parameters, on
// each of its first five executions.
const genericPlan = `SET LOCAL plan_cache_mode = force_generic_plan`

// recordArrays are records as moveSQL's twelve arrays.
type recordArrays struct {
	kind, step, target, uid, resourceVersion, digest, status, reason, detail []string
	attempt, batch                                                           []pgtype.Int8
	final                                                                    []bool
}

func columnsOf(records []Record) *recordArrays {
	n := len(records)
	c := &recordArrays{
		kind: make([]string, n), step: make([]string, n), target: make([]string, n), uid: make([]string, n),
		resourceVersion: make([]string, n), digest: make([]string, n), status: make([]string, n), reason: make([]string, n),
		detail: make([]string, n), attempt: make([]pgtype.Int8, n), batch: make([]pgtype.Int8, n), final: make([]bool, n),
	}
	for i := range records {
		r := &records[i]
		c.kind[i], c.step[i], c.target[i], c.uid[i] = string(r.Kind), r.Step, r.Target.String(), r.UID
		c.resourceVersion[i], c.digest[i], c.status[i], c.reason[i] = r.ResourceVersion, r.Digest, string(r.Status), string(r.Reason)
		c.detail[i], c.final[i] = string(r.Detail.JSON()), r.Final
		attempt, batch := r.counted()
		c.attempt[i], c.batch[i] = bigint(attempt), bigint(batch)
	}
	return c
}

// bigint is v as a bigint array element, NULL when nil: the server casts
// it to the column's integer, refusing a value out of its range (as for
// recordArgs' values), where a conversion here would wrap it.
func bigint(v *int) pgtype.Int8 {
	if v == nil {
		return pgtype.Int8{}
	}
	return pgtype.Int8{Int64: int64(*v), Valid: true}
}

func (c *recordArrays) args() []any {
	return []any{c.kind, c.step, c.target, c.attempt, c.uid, c.resourceVersion, c.digest, c.status, c.reason,
		c.batch, c.final, c.detail}
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

	// Prepared once per session, under its own text as the name (which
	// the batch then finds): the first move pays one round trip, every
	// later one neither the parse nor the plan.
	if _, err := conn.Prepare(ctx, moveSQL, moveSQL); err != nil {
		return nil, true, unreachable("preparing the move", err)
	}
	args := append([]any{p.OperationID, string(p.From), string(p.To), p.Outcome, p.Reason, p.Revision},
		columnsOf(p.Records).args()...)
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue(genericPlan)
	b.Queue(moveSQL, args...)
	b.Queue("COMMIT")
	results := conn.SendBatch(ctx, &b)
	defer results.Close() // a no-op once closed below; on a refusal it reads what is left
	for range 2 {         // BEGIN, genericPlan
		if _, err := results.Exec(); err != nil {
			return nil, true, unreachable("beginning transaction", err)
		}
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
