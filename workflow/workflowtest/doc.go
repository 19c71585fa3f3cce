// Package workflowtest holds test support for the engine and its families:
// an in-memory journal (Journal) with the semantics of the PostgreSQL
// journal (package store), so that a family's decisions and resolutions,
// and workflow.Operate driving them, run under `go test -short` in
// milliseconds.
//
// It is imported by _test files only. It never proves a PostgreSQL claim:
// whatever the journal's database guarantees (its compare-and-set, its
// state_edges, its triggers and constraints) is proven by the integration
// suite on a real PostgreSQL, and TestIntegrationJournalEquivalence
// (integration/) keeps this package honest by applying the same sequence of
// moves, valid and invalid, to both journals and requiring the same answers.
package workflowtest
