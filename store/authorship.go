package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/keyledger/keyledger/phase"
)

// RunRecordParams select one record across every run of a desired-state
// command (see PrepareRun): the runs of Command are the operations
// RunID(Command, n), and an operation journaled under Command itself.
type RunRecordParams struct {
	// Command is the command's mutation ID.
	Command string
	// Kind, Step and Target the record must have.
	Kind         RecordKind
	Step, Target string
	// UID and Digest, when not empty, the record must carry.
	UID, Digest string
}

// RunRecord is a record found in one run of a command.
type RunRecord struct {
	// Run is the mutation ID of the run (operation) that holds it.
	Run    string
	Record Record
}

// FindInRuns returns the newest record matching p in any run of p.Command,
// nil when there is none. It answers one question ("did any run of this
// plan journal this?") with at most one row, whatever the number of runs:
// the runs are found through the run-series index (migration 6: a plain
// equality, which row-level security lets become an index condition, where
// the pattern match of migration 3 scanned every operation) and each run's
// records through the (operation, step) index.
// The credentials family proves from it that a Secret carries the nonce of
// a create some run of its plan journaled, or that an earlier run adopted
// the Secret of that UID.
func (s *Store) FindInRuns(ctx context.Context, p RunRecordParams) (*RunRecord, error) {
	defer phase.Begin("query find-in-runs")()
	var found RunRecord
	row := s.pool.QueryRow(ctx, findInRunsQuery, p.Command, string(p.Kind), p.Step, p.Target, p.UID, p.Digest)
	r, err := scanRecord(row, &found.Run)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("reading the command's runs for "+p.Step+" records", err)
	}
	found.Record = r
	return &found, nil
}

// FindEachInRuns answers FindInRuns for each of ps, in order (nil where
// there is none), in one round trip: the same query per question, sent as
// one pipelined batch. A reader with many questions (a plan's Secrets)
// pays one round trip instead of one per question.
func (s *Store) FindEachInRuns(ctx context.Context, ps []RunRecordParams) ([]*RunRecord, error) {
	out := make([]*RunRecord, len(ps))
	if len(ps) == 0 {
		return out, nil
	}
	batch := &pgx.Batch{}
	for _, p := range ps {
		batch.Queue(findInRunsQuery, p.Command, string(p.Kind), p.Step, p.Target, p.UID, p.Digest)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, wrap("reading the command's runs", err)
	}
	defer conn.Release()
	if err := prepareForBatch(ctx, conn.Conn(), findInRunsQuery, len(ps)); err != nil {
		return nil, wrap("reading the command's runs", err)
	}
	results := conn.SendBatch(ctx, batch)
	defer results.Close() // read-only: every result is read below
	for i, p := range ps {
		var found RunRecord
		r, err := scanRecord(results.QueryRow(), &found.Run)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, wrap("reading the command's runs for "+p.Step+" records", err)
		}
		found.Record = r
		out[i] = &found
	}
	return out, nil
}

// findInRunsQuery is FindInRuns' SQL: $1 the command, $2 to $6 the
// record's kind, step, target, UID and digest (” for any).
const findInRunsQuery = `
		SELECT (SELECT o.mutation_id FROM keyledger.operations o WHERE o.id = r.operation_id), ` + recordColumns + `
		FROM keyledger.records r
		WHERE r.operation_id IN (SELECT o.id FROM keyledger.operations o WHERE o.mutation_id = $1 OR o.` + runSeries + ` = $1)
		  AND r.kind = $2::keyledger.record_kind AND r.step = $3 AND r.target = $4
		  AND ($5 = '' OR r.uid = $5) AND ($6 = '' OR r.digest = $6)
		ORDER BY r.id DESC LIMIT 1`
