// Package store is keyledger's journal in PostgreSQL: one row per operation
// and an append-only list of records (preparation, authority calls and their
// results, resolutions, probes, and one completion or refusal).
//
// Every method that writes runs in exactly one transaction. A state move is a
// compare-and-set on the operation row's state and revision (a trigger bumps
// the revision on every update), so ErrStateMoved answers any process whose
// view is stale, even when the state has cycled back to what it saw. The
// records that justify the move are inserted in the same transaction, so the
// journal never holds a state without its reason.
//
// The database, not the appender, owns the journal's shape (migration
// 000002): ids and times are assigned by triggers whatever an INSERT says
// (a namespace role may not even name those columns), nothing is appended
// to a finished operation, an operation becomes completed or refused only in
// the transaction that appends its completion or refusal record (deferred
// constraint triggers check both sides at commit), and every trigger
// function pins its search_path.
//
// One journal serves many namespaces (migration 000005): each namespace's
// runs connect as a role of its own, granted its namespaces by the schema
// owner (Grant, Revoke; every change is in the append-only grant history),
// and forced row-level security confines the role to the operations whose
// target namespace it was granted, and to their records. docs/tenancy.md
// describes the model.
//
// Errors never carry connection details: every pgx error is redacted to its
// SQLSTATE (and constraint name) or "connection failed".
// SQL stays in this package; the schema lives in ../migrations.
//
// Nothing here accepts or returns secret material: records hold names, UIDs,
// resourceVersions, digests, status words and content-free details.
package store
