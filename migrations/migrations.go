// Package migrations holds keyledger's journal schema as golang-migrate SQL
// files, embedded so that `keyledger migrate up` needs nothing on disk.
//
// The migrations grant to the operator role by name. The name is read from the
// session setting keyledger.operator_role (the store sets it from
// --operator-role, default keyledger_operator); migrations never create roles:
// the deployment declares the role, the test harness creates it.
package migrations

import "embed"

// FS holds the numbered *.up.sql and *.down.sql files.
//
//go:embed *.sql
var FS embed.FS
