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
	// CallUID keeps only the records of a target that an authority_call
	// of Step in the same operation, on the same target, bound to CallUID
	// (its UID precondition) acted on.
	CallUID string
	// Targets are the record targets (Target.String()) whose records are
	// returned, at most MaxStepTargets: the reader costs what these
	// targets' records cost, whatever the number of operations on the
	// Secret. No target reads nothing (and sends nothing).
	Targets []string
}

// MaxStepTargets bounds StepRecordsParams.Targets (the versioned family
// reads at most its history listing's bound).
const MaxStepTargets = 1000

// stepRecordsQuery finds the records of the step on the listed targets
// through records_snapshot_target (migration 10; partial to the
// create-snapshot step, the one step the versioned family reads this way),
// then checks each one's operation by its primary key and the call that
// binds it by records_one_call_per_attempt: what it reads depends on the
// listed targets' records, never on how many operations the Secret has
// (migration 6's operations_target and records_operation_step read every
// one of them). The operation's check is a correlated subquery kept from
// becoming a join (OFFSET 0): as a join, the planner may read all of the
// Secret's operations by operations_target when it has few.
const stepRecordsQuery = `
		SELECT r.operation_id, ` + recordColumns + `
		FROM keyledger.records r
		WHERE r.step = $3 AND r.target = ANY ($5::text[])
		  AND EXISTS (SELECT 1 FROM keyledger.operations o
		              WHERE o.id = r.operation_id AND o.target_namespace = $1 AND o.target_name = $2 OFFSET 0)
		  AND EXISTS (SELECT 1 FROM keyledger.records c
		              WHERE c.operation_id = r.operation_id AND c.step = $3 AND c.target = r.target
		                AND c.kind = 'authority_call' AND c.uid = $4)
		ORDER BY r.operation_id, r.id`

// StepRecords returns the records of p.Step (calls, results, resolutions)
// on each of p.Targets, of every operation on p.Namespace/p.Name that holds
// an authority_call of that step on that target bound to p.CallUID,
// grouped by operation (oldest first), each group in append order. The
// versioned family proves from them which of the snapshot objects it
// listed it created: the UID an applied create answered with, or the nonce
// a call carried.
func (s *Store) StepRecords(ctx context.Context, p StepRecordsParams) ([][]Record, error) {
	if len(p.Targets) > MaxStepTargets {
		return nil, fmt.Errorf("reading %s records: %d targets, at most %d", p.Step, len(p.Targets), MaxStepTargets)
	}
	if len(p.Targets) == 0 {
		return nil, nil
	}
	defer phase.Begin("query step-records")()
	rows, err := s.pool.Query(ctx, stepRecordsQuery, p.Namespace, p.Name, p.Step, p.CallUID, p.Targets)
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
		x.r, err = scanRecord(row, &p.Namespace, &x.op)
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
