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
// SQL stays in this package; the schema lives in ../migrations.
//
// Nothing here accepts or returns secret material: records hold names, UIDs,
// resourceVersions, digests, status words and content-free details.
package store
