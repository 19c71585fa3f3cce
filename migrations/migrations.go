// Package migrations holds keyledger's journal schema as golang-migrate SQL
// files, embedded so that `keyledger migrate up` needs nothing on disk.
//
// Migrations never create roles and, since 000005, grant no role anything
// but one: 000013 lets PostgreSQL's predefined role pg_monitor (whose member
// CloudNativePG's metrics exporter is) call the count functions of the
// schema keyledger_metrics, and nothing else. Each namespace's role is granted by the schema owner with keyledger
// journal grant (store.Grant). Migrations 000001 to 000004 still grant the
// shared operator role of older journals (named by the session setting
// keyledger.operator_role, --operator-role, default keyledger_operator)
// when it exists, so an existing journal is unchanged until 000005, which
// revokes those rights. A down step that would drop journal rows (000001,
// 000005) raises SQLSTATE KL001 unless the session sets
// keyledger.destroy_journal_records = yes (--destroy-journal-records).
package migrations

import "embed"

// FS holds the numbered *.up.sql and *.down.sql files.
//
//go:embed *.sql
var FS embed.FS
