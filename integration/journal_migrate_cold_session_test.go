package integration

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
)

// checkCase is one row the journal's CHECK constraints and insert
// trigger judge: the SQL that writes it (in a transaction that is rolled
// back) and what the journal answers, "" for accepted, else the
// constraint's name or the SQLSTATE.
type checkCase struct {
	name, sql string
	args      []any
	want      string
}

// coldSessionChecks are the boundaries of every pattern migration 9
// rewrote, around one operation (opID, $1 where used) of the journal.
func coldSessionChecks() []checkCase {
	digest := "sha256:" + strings.Repeat("a", 64)
	insertOp := `INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name, expected_uid)
		VALUES ($1, $2, $3, $4, 'ns', 'db', '')`
	op := func(name, kind, mutation, request, digest, want string) checkCase {
		return checkCase{name, insertOp, []any{kind, mutation, request, digest}, want}
	}
	move := func(name, outcome, reason, want string) checkCase {
		return checkCase{name, `UPDATE keyledger.operations SET state = 'refused', outcome = $2, reason = $3 WHERE id = $1`,
			[]any{outcome, reason}, want}
	}
	rec := func(name, step, digest, status, reason, want string) checkCase {
		return checkCase{name, `INSERT INTO keyledger.records (operation_id, kind, step, digest, status, reason) VALUES ($1, 'observation', $2, $3, $4, $5)`,
			[]any{step, digest, status, reason}, want}
	}
	id := func(n int) string { return strings.Repeat("m", n) }
	return []checkCase{
		op("kind of 64", "K"+strings.Repeat("x", 63), "c-1", "r", digest, ""),
		op("kind of 65", "K"+strings.Repeat("x", 64), "c-2", "r", digest, "operations_kind_check"),
		op("kind in lower case", "kind", "c-3", "r", digest, "operations_kind_check"),
		op("kind with a digit", "K1", "c-4", "r", digest, "operations_kind_check"),
		op("empty kind", "", "c-5", "r", digest, "operations_kind_check"),
		op("mutation ID of 128", "K", id(128), "r", digest, ""),
		op("mutation ID of 129", "K", id(129), "r", digest, "operations_mutation_id_check"),
		op("empty mutation ID", "K", "", "r", digest, "operations_mutation_id_check"),
		op("mutation ID with a slash", "K", "a/b", "r", digest, "operations_mutation_id_check"),
		op("mutation ID with a newline", "K", "ab\n", "r", digest, "operations_mutation_id_check"),
		op("mutation ID of every allowed character", "K", "azAZ09._:-", "r", digest, ""),
		op("request ID of 128", "K", "c-6", id(128), digest, ""),
		op("request ID of 129", "K", "c-7", id(129), digest, "operations_request_id_check"),
		op("empty request ID", "K", "c-8", "", digest, "operations_request_id_check"),
		op("digest of 63", "K", "c-9", "r", digest[:len(digest)-1], "operations_command_digest_check"),
		op("digest of 65", "K", "c-10", "r", digest+"a", "operations_command_digest_check"),
		op("digest in upper case", "K", "c-11", "r", strings.ToUpper(digest), "operations_command_digest_check"),
		op("digest of another hash", "K", "c-12", "r", "sha512:"+strings.Repeat("a", 64), "operations_command_digest_check"),
		move("outcome of 64", "o"+strings.Repeat("-", 63), "r", ""),
		move("outcome of 65", "o"+strings.Repeat("-", 64), "r", "operations_outcome_check"),
		move("outcome with a digit", "o1", "r", "operations_outcome_check"),
		move("outcome starting with a dash", "-o", "r", "operations_outcome_check"),
		move("reason of 64", "o", "r"+strings.Repeat("-", 63), ""),
		move("reason of 65", "o", "r"+strings.Repeat("-", 64), "operations_reason_check"),
		move("reason starting with a dash", "o", "-r", "operations_reason_check"),
		move("reason starting with a digit", "o", "1r", ""),
		rec("step of 64", "s"+strings.Repeat("-", 63), "", "", "", ""),
		rec("step of 65", "s"+strings.Repeat("-", 64), "", "", "", "records_step_check"),
		rec("step starting with a digit", "1s", "", "", "", "records_step_check"),
		rec("empty step", "", "", "", "", "records_step_check"),
		rec("record digest", "s", digest, "", "", ""),
		rec("record digest of 63", "s", digest[:len(digest)-1], "", "", "records_digest_check"),
		rec("record digest of 65", "s", digest+"a", "", "", "records_digest_check"),
		rec("status of 64", "s", "", strings.Repeat("-", 64), "", ""),
		rec("status of 65", "s", "", strings.Repeat("-", 65), "", "records_status_check"),
		rec("status in upper case", "s", "", "Applied", "", "records_status_check"),
		rec("reason of 64 on a record", "s", "", "", strings.Repeat("9", 64), ""),
		rec("reason of 65 on a record", "s", "", "", strings.Repeat("9", 65), "records_reason_check"),
		rec("reason with a space on a record", "s", "", "", "a b", "records_reason_check"),
		{"operation that does not start prepared", `INSERT INTO keyledger.operations (kind, mutation_id, request_id, command_digest, target_namespace, target_name, state)
			VALUES ('K', 'c-13', 'r', $1, 'ns', 'db', 'calling')`, []any{digest}, "23514"},
	}
}

// judge runs each case in its own transaction, rolled back, and returns
// what the journal answered.
func judge(ctx context.Context, t *testing.T, conn *pgx.Conn, opID int64) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, c := range coldSessionChecks() {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		args := c.args
		if strings.Contains(c.sql, "$5") || strings.HasPrefix(strings.TrimSpace(c.sql), "UPDATE") {
			args = append([]any{opID}, args...)
		}
		_, err = tx.Exec(ctx, c.sql, args...)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			got[c.name] = ""
		case errors.As(err, &pgErr) && pgErr.ConstraintName != "":
			got[c.name] = pgErr.ConstraintName
		case errors.As(err, &pgErr):
			got[c.name] = pgErr.Code
		default:
			require.NoError(t, err, c.name)
		}
		require.NoError(t, tx.Rollback(ctx))
	}
	return got
}

// Migration 9 rewrites the journal's bounded patterns for a new session's
// sake (an unbounded pattern and a length) and merges the insert triggers
// of operations: on a journal that already holds operations, the same
// rows are accepted and refused, under the same constraint names, before
// it, after it and after its down step; and the ids, times and start
// state are the database's as before.
func TestIntegrationMigrateColdSessionKeepsTheChecks(t *testing.T) {
	t.Parallel()
	setup(t) // skips under -short; the shared platform
	db := suite.FreshDatabase(t)
	ctx := context.WithoutCancel(t.Context())
	status, err := store.MigrateSource(ctx, db, store.MigrateUp, store.DefaultOperatorRole, migrationsUpTo(t, 8))
	require.NoError(t, err)
	require.Equal(t, uint(8), status.Version)
	conn := suite.Connect(t, db)
	var opID int64
	require.NoError(t, conn.QueryRow(ctx, `INSERT INTO keyledger.operations
		(kind, mutation_id, request_id, command_digest, target_namespace, target_name, expected_uid)
		VALUES ('SecretUpdate', 'm-before-9', 'r', $1, 'ns', 'db', '') RETURNING id`, "sha256:"+strings.Repeat("c", 64)).Scan(&opID))
	_, err = conn.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step) VALUES ($1, 'preparation', 'preparation')`, opID)
	require.NoError(t, err)

	want := map[string]string{}
	for _, c := range coldSessionChecks() {
		want[c.name] = c.want
	}
	require.Equal(t, want, judge(ctx, t, conn, opID), "migration 8")
	status, err = store.MigrateSource(ctx, db, store.MigrateUp, store.DefaultOperatorRole, migrationsUpTo(t, 9))
	require.NoError(t, err)
	require.Equal(t, uint(9), status.Version)
	require.Equal(t, want, judge(ctx, t, conn, opID), "migration 9")

	// The owner names an id and times: the stamp overwrites them.
	var id int64
	var stamped bool
	require.NoError(t, conn.QueryRow(ctx, `INSERT INTO keyledger.operations
		(id, kind, mutation_id, request_id, command_digest, target_namespace, target_name, created_at, updated_at)
		OVERRIDING SYSTEM VALUE VALUES (999999, 'K', 'm-after-9', 'r', $1, 'ns', 'db', '2000-01-01', '2000-01-01')
		RETURNING id, created_at > now() - interval '1 hour' AND updated_at = created_at`, "sha256:"+strings.Repeat("c", 64)).Scan(&id, &stamped))
	require.Greater(t, id, opID)
	require.Less(t, id, int64(999999))
	require.True(t, stamped, "created_at and updated_at are the database's")
	var recID int64
	require.NoError(t, conn.QueryRow(ctx, `INSERT INTO keyledger.records (id, operation_id, kind, step, created_at)
		OVERRIDING SYSTEM VALUE VALUES (999999, $1, 'preparation', 'preparation', '2000-01-01') RETURNING id, created_at > now() - interval '1 hour'`, id).Scan(&recID, &stamped))
	require.Less(t, recID, int64(999999))
	require.True(t, stamped, "a record's created_at is the database's")

	status, err = store.MigrateSource(ctx, db, store.MigrateDown, store.DefaultOperatorRole, migrationsUpTo(t, 9))
	require.NoError(t, err)
	require.Equal(t, uint(8), status.Version)
	require.Equal(t, want, judge(ctx, t, conn, opID), "migration 9 down")
}
