package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/keyledger/keyledger/phase"
)

// StepRecordsParams select the records of one step across operations.
type StepRecordsParams struct {
	// Namespace and Name are the operations' target.
	Namespace, Name string
	// Step is the step whose records are returned.
	Step string
	// CallUID keeps only operations holding an authority_call of Step
	// whose UID precondition is CallUID.
	CallUID string
}

// stepRecordsQuery finds the operations on the target through
// operations_target and each one's records of the step through
// records_operation_step (migration 6).
const stepRecordsQuery = `
		SELECT operation_id, ` + recordColumns + `
		FROM keyledger.records r
		WHERE r.operation_id IN (SELECT o.id FROM keyledger.operations o WHERE o.target_namespace = $1 AND o.target_name = $2)
		  AND r.step = $3
		  AND EXISTS (SELECT 1 FROM keyledger.records c
		              WHERE c.operation_id = r.operation_id AND c.kind = 'authority_call' AND c.step = $3 AND c.uid = $4)
		ORDER BY operation_id, id`

// StepRecords returns the records of p.Step (calls, results, resolutions)
// of every operation on p.Namespace/p.Name that holds an authority_call of
// that step bound to p.CallUID, grouped by operation (oldest first), each
// group in append order. The versioned family proves from them which
// snapshot objects it created: the UID an applied create answered with, or
// the nonce a call carried.
func (s *Store) StepRecords(ctx context.Context, p StepRecordsParams) ([][]Record, error) {
	defer phase.Begin("query step-records")()
	rows, err := s.pool.Query(ctx, stepRecordsQuery, p.Namespace, p.Name, p.Step, p.CallUID)
	if err != nil {
		return nil, fmt.Errorf("reading %s records: %w", p.Step, redact(err))
	}
	type opRecord struct {
		op int64
		r  Record
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (opRecord, error) {
		var x opRecord
		var err error
		x.r, err = scanRecord(row, &x.op)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s records: %w", p.Step, redact(err))
	}
	var out [][]Record
	for i, x := range all {
		if i == 0 || all[i-1].op != x.op {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], x.r)
	}
	return out, nil
}
