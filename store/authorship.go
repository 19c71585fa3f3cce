package store

import (
	"context"
	"errors"
	"regexp"

	"github.com/jackc/pgx/v5"
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
// the runs are found through the mutation ID pattern index
// (migration 3) and each run's calls through its per-attempt call index.
// The credentials family proves from it that a Secret carries the nonce of
// a create some run of its plan journaled, or that an earlier run adopted
// the Secret of that UID.
func (s *Store) FindInRuns(ctx context.Context, p RunRecordParams) (*RunRecord, error) {
	pattern := "^" + regexp.QuoteMeta(p.Command) + regexp.QuoteMeta(RunSuffix) + "[1-9][0-9]{0,9}$"
	var found RunRecord
	row := s.pool.QueryRow(ctx, `
		SELECT (SELECT o.mutation_id FROM keyledger.operations o WHERE o.id = r.operation_id), `+recordColumns+`
		FROM keyledger.records r
		WHERE r.operation_id IN (SELECT o.id FROM keyledger.operations o WHERE o.mutation_id = $1 OR o.mutation_id ~ $2)
		  AND r.kind = $3::keyledger.record_kind AND r.step = $4 AND r.target = $5
		  AND ($6 = '' OR r.uid = $6) AND ($7 = '' OR r.digest = $7)
		ORDER BY r.id DESC LIMIT 1`, p.Command, pattern, string(p.Kind), p.Step, p.Target, p.UID, p.Digest)
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
