package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReasonNegativeAge: journal prune was given an age below zero (exit 64).
const ReasonNegativeAge = "negative-age"

// PruneResult is what one prune removed, as the prune event journaled it.
type PruneResult struct {
	// Event is the id of the prune event in keyledger.prune_events.
	Event int64 `json:"event"`
	// Cutoff: only operations finalized before it were removed.
	Cutoff time.Time `json:"cutoff"`
	// Operations and Records are the removed rows; RecordKinds counts the
	// removed records by kind.
	Operations  int64            `json:"operations"`
	Records     int64            `json:"records"`
	RecordKinds map[string]int64 `json:"recordKinds"`
}

// PruneEvent is one row of keyledger.prune_events: who pruned, when, the
// cutoff and what was removed.
type PruneEvent struct {
	PruneResult
	At          time.Time `json:"at"`
	SessionRole string    `json:"sessionRole"`
	ActingRole  string    `json:"actingRole"`
	OlderThan   string    `json:"olderThan"`
}

// Prune removes the finished runs of desired-state commands (credential
// plans) finalized more than olderThan ago, with their records, keeping
// each command's newest finished run and its newest completed run, every
// unfinished operation and every one-shot operation (see migration 6 for
// why one-shot operations are their own tombstones). It runs
// keyledger.prune, which only the schema owner may execute: any other role
// is refused by PostgreSQL (ReasonNotSchemaOwner, exit 64), and a journal
// below migration 6 is ReasonSchemaTooOld. One transaction: the prune event
// and the removal commit together or not at all.
func (s *Store) Prune(ctx context.Context, olderThan time.Duration) (*PruneResult, error) {
	if olderThan < 0 {
		return nil, &PreconditionError{Reason: ReasonNegativeAge, Msg: "journal prune --older-than must not be negative",
			Fix: "give the age of the oldest finished runs to keep, for example --older-than 720h"}
	}
	var res PruneResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var kinds map[string]int64
		err := tx.QueryRow(ctx, `SELECT event_id, cutoff, operations, records, record_kinds FROM keyledger.prune($1::interval)`,
			fmt.Sprintf("%d microseconds", olderThan.Microseconds())).
			Scan(&res.Event, &res.Cutoff, &res.Operations, &res.Records, &kinds)
		if err != nil {
			return pruneError(err)
		}
		res.RecordKinds = kinds
		return nil
	})
	if err != nil {
		return nil, err
	}
	if res.RecordKinds == nil {
		res.RecordKinds = map[string]int64{}
	}
	return &res, nil
}

// PruneEvents lists every prune, oldest first (schema owner only).
func (s *Store) PruneEvents(ctx context.Context) ([]PruneEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, at, session_role::text, acting_role::text, older_than::text, cutoff,
		operations, records, record_kinds FROM keyledger.prune_events ORDER BY id`)
	if err != nil {
		return nil, pruneError(err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (PruneEvent, error) {
		var e PruneEvent
		err := row.Scan(&e.Event, &e.At, &e.SessionRole, &e.ActingRole, &e.OlderThan, &e.Cutoff, &e.Operations, &e.Records, &e.RecordKinds)
		return e, err
	})
	if err != nil {
		return nil, pruneError(err)
	}
	return events, nil
}

// pruneError names a journal without keyledger.prune (below migration 6)
// and a role PostgreSQL refused; anything else is wrapped and redacted.
func pruneError(err error) error {
	var server *serverError
	if errors.As(redact(err), &server) {
		switch server.SQLState() {
		case "42883", "42P01", "3F000": // undefined_function, undefined_table, invalid_schema_name
			return &PreconditionError{Reason: ReasonSchemaTooOld,
				Msg: "the journal has no prune yet (it is migrated below version 6); nothing was removed",
				Fix: "run keyledger migrate up as the schema owner, then prune again"}
		case "42501": // insufficient_privilege
			return &PreconditionError{Reason: ReasonNotSchemaOwner,
				Msg: "PostgreSQL refused the prune to the connecting role: only the journal's owner prunes; nothing was removed",
				Fix: "run keyledger journal prune as the role that ran keyledger migrate up"}
		}
	}
	return wrap("pruning the journal", err)
}
