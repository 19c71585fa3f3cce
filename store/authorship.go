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
	// Namespace is the namespace the command's runs are journaled in:
	// mutation IDs are unique within a namespace (migration 12), so a run
	// of another namespace is never an answer, whoever asks.
	Namespace string
	// Command is the command's mutation ID.
	Command string
	// Kind, Step and Target the record must have.
	Kind         RecordKind
	Step, Target string
	// UID and Digest, when not empty, the record must carry.
	UID, Digest string
	// Except, when not empty, is the mutation ID of a run whose records
	// are not answers: a run being resumed asks whether any other run
	// journaled the same thing, and its own record (which whoever holds
	// the journal role could have written) must not hide an older one.
	Except string
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
	var r Record
	err := s.onReadConn(func(q reader) error {
		var err error
		r, err = scanRecord(q.QueryRow(ctx, findInRunsQuery, p.Command, string(p.Kind), p.Step, p.Target, p.UID, p.Digest, p.Namespace, p.Except),
			&p.Namespace, &found.Run)
		return err
	})
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
// there is none), in one statement: the questions travel as arrays
// (findEachInRunsQuery) and each is answered by the same lookup as
// FindInRuns, through the same indexes, under the same row-level
// security. A reader with many questions (a plan's Secrets) pays one
// round trip and one plan instead of one query per question: a rerun of
// a 64-Secret plan asks about two hundred, which as a pipelined batch of
// single queries cost the server a bind and an execution each.
func (s *Store) FindEachInRuns(ctx context.Context, ps []RunRecordParams) ([]*RunRecord, error) {
	out := make([]*RunRecord, len(ps))
	if len(ps) == 0 {
		return out, nil
	}
	defer phase.Begin("query find-each-in-runs")()
	var namespaces, excepts, commands, kinds, steps, targets, uids, digests []string
	for _, p := range ps {
		namespaces, excepts = append(namespaces, p.Namespace), append(excepts, p.Except)
		commands, kinds, steps = append(commands, p.Command), append(kinds, string(p.Kind)), append(steps, p.Step)
		targets, uids, digests = append(targets, p.Target), append(uids, p.UID), append(digests, p.Digest)
	}
	err := s.onReadConn(func(q reader) error {
		rows, err := q.Query(ctx, findEachInRunsQuery, commands, kinds, steps, targets, uids, digests, namespaces, excepts)
		if err != nil {
			return wrap("reading the command's runs", err)
		}
		defer rows.Close()
		for rows.Next() {
			var ord int64
			var ns string
			var found RunRecord
			r, err := scanRecord(rows, &ns, &ord, &ns, &found.Run)
			if err != nil {
				return wrap("reading the command's runs", err)
			}
			if ord < 1 || ord > int64(len(ps)) || out[ord-1] != nil {
				return errors.New("reading the command's runs: an answer to no question asked")
			}
			found.Record = r
			out[ord-1] = &found
		}
		if err := rows.Err(); err != nil {
			return wrap("reading the command's runs", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// findEachInRunsQuery is FindEachInRuns' SQL: $1 to $6 the questions'
// commands, kinds, steps, targets, UIDs and digests (empty for any), $7
// their namespaces, $8 the runs they skip (empty for none), one
// element per question; each row is a question's 1-based position, its
// namespace (its answer's targets are in it) and its answer, as
// findInRunsQuery finds it; a question without one has no row.
const findEachInRunsQuery = `
		SELECT q.ord, q.q_namespace, f.*
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
		  WITH ORDINALITY AS q(q_command, q_kind, q_step, q_target, q_uid, q_digest, q_namespace, q_except, ord)
		CROSS JOIN LATERAL (
			SELECT (SELECT o.mutation_id FROM keyledger.operations o WHERE o.id = r.operation_id), ` + recordColumns + `
			FROM keyledger.records r
			WHERE r.operation_id IN (SELECT o.id FROM keyledger.operations o
			                         WHERE o.target_namespace = q.q_namespace AND (o.mutation_id = q.q_command OR o.` + runSeries + ` = q.q_command)
			                           AND o.mutation_id <> q.q_except)
			  AND r.kind = q.q_kind::keyledger.record_kind AND r.step = q.q_step AND r.target = q.q_target
			  AND (q.q_uid = '' OR r.uid = q.q_uid) AND (q.q_digest = '' OR r.digest = q.q_digest)
			ORDER BY r.id DESC LIMIT 1) f
		ORDER BY q.ord`

// findInRunsQuery is FindInRuns' SQL: $1 the command, $2 to $6 the
// record's kind, step, target, UID and digest (” for any), $7 the
// namespace of its runs, $8 a run to skip (” for none).
const findInRunsQuery = `
		SELECT (SELECT o.mutation_id FROM keyledger.operations o WHERE o.id = r.operation_id), ` + recordColumns + `
		FROM keyledger.records r
		WHERE r.operation_id IN (SELECT o.id FROM keyledger.operations o
		                         WHERE o.target_namespace = $7 AND (o.mutation_id = $1 OR o.` + runSeries + ` = $1)
		                           AND o.mutation_id <> $8)
		  AND r.kind = $2::keyledger.record_kind AND r.step = $3 AND r.target = $4
		  AND ($5 = '' OR r.uid = $5) AND ($6 = '' OR r.digest = $6)
		ORDER BY r.id DESC LIMIT 1`
