package integration

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/migrations"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/workflowtest"
)

// migrationsUpTo is the embedded migrations up to and including version.
func migrationsUpTo(t *testing.T, version uint) fs.FS {
	t.Helper()
	src := fstest.MapFS{}
	entries, err := fs.ReadDir(migrations.FS, ".")
	require.NoError(t, err)
	for _, entry := range entries {
		var n uint
		_, err := fmt.Sscanf(entry.Name(), "%d_", &n)
		require.NoError(t, err, entry.Name())
		if n <= version {
			b, err := fs.ReadFile(migrations.FS, entry.Name())
			require.NoError(t, err)
			src[entry.Name()] = &fstest.MapFile{Data: b}
		}
	}
	return src
}

// schemaExists reports whether the keyledger schema exists in the database.
func schemaExists(t *testing.T, url string) bool {
	t.Helper()
	var exists bool
	require.NoError(t, suite.Connect(t, url).QueryRow(t.Context(),
		`SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'keyledger')`).Scan(&exists))
	return exists
}

// A fresh install needs no shared operator role (migration 5 has each
// namespace's role granted by keyledger journal grant): `migrate up` names a
// role that does not exist and succeeds, warning that --operator-role is
// deprecated; a second `up` is a no-op.
func TestIntegrationMigrateNeedsNoOperatorRole(t *testing.T) {
	t.Parallel()
	e := setup(t)
	db := suite.FreshDatabase(t)
	role := "kl_operator_" + suite.RandomSuffix(t)

	r := e.Keyledger([]string{"migrate", "up", "--operator-role", role}, suite.WithDatabase(db))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, store.MigrationStatus{Version: suite.LatestVersion(t), Changed: true}, suite.MigrateStatus(t, r))
	require.Contains(t, r.Stderr, `"msg":"deprecated flag","flag":"--operator-role"`)
	require.True(t, schemaExists(t, db))

	r = e.Keyledger([]string{"migrate", "up"}, suite.WithDatabase(db))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, store.MigrationStatus{Version: suite.LatestVersion(t)}, suite.MigrateStatus(t, r), "the second up is a no-op")
	require.NotContains(t, r.Stderr, "deprecated", "no warning without the flag")
}

// A role that may not create the schema is told so before anything changes.
func TestIntegrationMigrateSchemaCreateDenied(t *testing.T) {
	t.Parallel()
	e := setup(t)
	db := suite.FreshDatabase(t)
	user, pw := "kl_nocreate_"+suite.RandomSuffix(t), suite.RandomSuffix(t)
	require.NoError(t, suite.Postgres().EnsureRole(t.Context(), user, pw))
	url, err := suite.Postgres().URLFor(db, user, pw)
	require.NoError(t, err)

	r := e.Keyledger([]string{"migrate", "up"}, suite.WithDatabase(url))
	require.Equal(t, 64, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stderr, "schema-create-denied")
	require.Contains(t, r.Stderr, "may not create schema keyledger")
	require.NotContains(t, r.Stderr, user, "no user name on stderr")
	require.NotContains(t, r.Stderr, pw)
	require.False(t, schemaExists(t, db))

	r = e.Keyledger([]string{"migrate", "version"}, suite.WithDatabase(url))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, store.MigrationStatus{}, suite.MigrateStatus(t, r))
	require.False(t, schemaExists(t, db), "migrate version creates nothing")
}

// A schema left dirty by an earlier keyledger (a failed first migration,
// rolled back by PostgreSQL, marked dirty by golang-migrate): up says how
// to recover, recover clears the mark, up then succeeds.
func TestIntegrationMigrateRecoversDirtySchema(t *testing.T) {
	t.Parallel()
	e := setup(t)
	db := suite.FreshDatabase(t)
	conn := suite.Connect(t, db)
	_, err := conn.Exec(t.Context(), `CREATE SCHEMA keyledger;
		CREATE TABLE keyledger.schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL);
		INSERT INTO keyledger.schema_migrations VALUES (1, true)`)
	require.NoError(t, err)

	r := e.Keyledger([]string{"migrate", "up"}, suite.WithDatabase(db))
	require.Equal(t, 64, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stderr, "schema-dirty")
	require.Contains(t, r.Stderr, "keyledger migrate recover")

	r = e.Keyledger([]string{"migrate", "recover"}, suite.WithDatabase(db))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, store.MigrationStatus{Version: 0, Changed: true}, suite.MigrateStatus(t, r))

	r = e.Keyledger([]string{"migrate", "up"}, suite.WithDatabase(db))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, store.MigrationStatus{Version: suite.LatestVersion(t), Changed: true}, suite.MigrateStatus(t, r))

	r = e.Keyledger([]string{"migrate", "recover"}, suite.WithDatabase(db))
	require.Equal(t, 64, r.Code, "a clean schema has nothing to recover: %s", r.Stderr)
	require.Contains(t, r.Stderr, "schema-not-dirty")
}

// A migration that fails rolls back whole: the version stays where it was,
// not dirty, and nothing of the failed file remains. The failing migration
// is injected as a second file beside the real ones.
func TestIntegrationMigrateFailureRollsBackWhole(t *testing.T) {
	t.Parallel()
	e := setup(t)
	db := suite.FreshDatabase(t)
	src := fstest.MapFS{
		"000099_fails.up.sql": {Data: []byte(`CREATE TABLE keyledger.half_done (id int);
INSERT INTO keyledger.half_done VALUES (1);
SELECT 1 / 0;`)},
		"000099_fails.down.sql": {Data: []byte(`DROP TABLE IF EXISTS keyledger.half_done;`)},
	}
	entries, err := fs.ReadDir(migrations.FS, ".")
	require.NoError(t, err)
	for _, entry := range entries {
		b, err := fs.ReadFile(migrations.FS, entry.Name())
		require.NoError(t, err)
		src[entry.Name()] = &fstest.MapFile{Data: b}
	}
	ctx := context.WithoutCancel(t.Context())

	status, err := store.MigrateSource(ctx, db, store.MigrateUp, store.DefaultOperatorRole, src)
	var pre *store.PreconditionError
	require.ErrorAs(t, err, &pre)
	require.Equal(t, store.ReasonMigrationFailed, pre.Reason)
	latest := suite.LatestVersion(t)
	require.Contains(t, pre.Msg, "migration 99 failed")
	require.Contains(t, pre.Msg, "22012", "the SQLSTATE of division_by_zero")
	require.Equal(t, store.MigrationStatus{Version: latest}, status, "the real migrations applied, 99 rolled back, not dirty")

	var halfDone bool
	require.NoError(t, suite.Connect(t, db).QueryRow(t.Context(), `SELECT to_regclass('keyledger.half_done') IS NOT NULL`).Scan(&halfDone))
	require.False(t, halfDone, "nothing of the failed migration remains")

	r := e.Keyledger([]string{"migrate", "version"}, suite.WithDatabase(db))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, store.MigrationStatus{Version: latest}, suite.MigrateStatus(t, r))

	// The failure is repeatable and still leaves nothing dirty; the real
	// migrations see a clean schema at their newest version.
	_, err = store.MigrateSource(ctx, db, store.MigrateUp, store.DefaultOperatorRole, src)
	require.ErrorAs(t, err, &pre)
	r = e.Keyledger([]string{"migrate", "up"}, suite.WithDatabase(db))
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, store.MigrationStatus{Version: latest}, suite.MigrateStatus(t, r))

	// A journal that the failure left behind still works for the operator.
	var tables int
	require.NoError(t, suite.Connect(t, db).QueryRow(t.Context(),
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = 'keyledger' AND table_name IN ('operations', 'records')`).Scan(&tables))
	require.Equal(t, 2, tables)
}

// Migration 4 moves an authority call's control data (batch, final) out of
// the free-form detail into typed columns: a journal written by the engine
// before it reads back with both typed and nothing left in detail; down
// puts the keys back where the older engine reads them.
func TestIntegrationMigrateCallControlOutOfDetail(t *testing.T) {
	t.Parallel()
	setup(t) // skips under -short; the shared platform and its operator role
	db := suite.FreshDatabase(t)
	ctx := context.WithoutCancel(t.Context())
	upTo := func(version uint) fs.FS { return migrationsUpTo(t, version) }
	status, err := store.MigrateSource(ctx, db, store.MigrateUp, store.DefaultOperatorRole, upTo(3))
	require.NoError(t, err)
	require.Equal(t, uint(3), status.Version)

	// What the engine of migration 3 wrote: a call whose detail held the
	// control keys beside the family's own.
	conn := suite.Connect(t, db)
	var opID int64
	require.NoError(t, conn.QueryRow(ctx, `INSERT INTO keyledger.operations
		(kind, mutation_id, request_id, command_digest, target_namespace, target_name, expected_uid)
		VALUES ('SecretUpdate', 'm-old', 'r', $1, 'ns', 'db', '') RETURNING id`, "sha256:"+strings.Repeat("c", 64)).Scan(&opID))
	_, err = conn.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step, target, attempt, detail) VALUES
		($1, 'preparation', 'preparation', '', NULL, '{"keys":["a"]}'),
		($1, 'authority_call', 'replace-live', 'secret/db', 1, '{"batch":2,"final":true,"version":3}'),
		($1, 'authority_result', 'replace-live', 'secret/db', NULL, '{"code":200}')`, opID)
	require.NoError(t, err)

	status, err = store.MigrateSource(ctx, db, store.MigrateUp, store.DefaultOperatorRole, upTo(4))
	require.NoError(t, err)
	require.Equal(t, uint(4), status.Version)
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	defer st.Close()
	_, records, err := st.Snapshot(ctx, "", "m-old")
	require.NoError(t, err)
	require.Len(t, records, 3)
	call := records[1]
	require.Equal(t, store.RecordAuthorityCall, call.Kind)
	require.Equal(t, 2, call.Batch)
	require.True(t, call.Final)
	require.Equal(t, map[string]any{"version": float64(3)}, workflowtest.Fields(call.Detail), "the control keys left detail; the family's stayed")
	for _, r := range []store.Record{records[0], records[2]} {
		require.Zero(t, r.Batch, "%s carries no batch", r.Kind)
		require.False(t, r.Final, "%s carries no final", r.Kind)
	}

	// Only a call may carry control data, and every call carries a batch.
	_, err = conn.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step, batch) VALUES ($1, 'observation', 'read-live', 1)`, opID)
	require.Equal(t, "23514", sqlState(err), "check_violation: %v", err)
	_, err = conn.Exec(ctx, `INSERT INTO keyledger.records (operation_id, kind, step, target, attempt) VALUES ($1, 'authority_call', 'replace-live', 'secret/db', 2)`, opID)
	require.Equal(t, "23514", sqlState(err), "check_violation: %v", err)

	status, err = store.MigrateSource(ctx, db, store.MigrateDown, store.DefaultOperatorRole, upTo(4))
	require.NoError(t, err)
	require.Equal(t, uint(3), status.Version)
	var detail map[string]any
	require.NoError(t, conn.QueryRow(ctx, `SELECT detail FROM keyledger.records WHERE operation_id = $1 AND kind = 'authority_call'`, opID).Scan(&detail))
	require.Equal(t, map[string]any{"batch": float64(2), "final": true, "version": float64(3)}, detail)
}

// `migrate up --wait` keeps trying while PostgreSQL is not reachable yet (a
// Job started beside its database) and migrates once it is; without --wait,
// or when the wait runs out, it fails with 69 and says how many attempts it
// made. PostgreSQL is "not reachable yet" as a loopback port nothing listens
// on, until a proxy to the real server starts listening there.
func TestIntegrationMigrateWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	e := setup(t)
	db := suite.FreshDatabase(t)
	u, err := url.Parse(db)
	require.NoError(t, err)
	target := u.Host

	// A loopback port with nothing behind it (yet).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	late := l.Addr().String()
	require.NoError(t, l.Close())
	u.Host = late
	lateURL := u.String()

	r := e.Keyledger([]string{"migrate", "up"}, suite.WithDatabase(lateURL))
	require.Equal(t, 69, r.Code, "no --wait: one attempt; stdout %s stderr %s", r.Stdout, r.Stderr)
	r = e.Keyledger([]string{"migrate", "up", "--wait", "2s"}, suite.WithDatabase(lateURL))
	require.Equal(t, 69, r.Code, "the wait runs out; stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Regexp(t, `"msg":"database wait","attempts":[2-9],"wait":"2s","reachable":false`, r.Stderr)
	require.NotContains(t, r.Stderr, late, "the database address is not printed")
	require.False(t, schemaExists(t, db), "nothing was migrated")

	// The proxy starts listening on the late port a little after migrate
	// starts trying.
	started := make(chan struct{})
	go func() {
		defer close(started)
		time.Sleep(1500 * time.Millisecond)
		l, err := net.Listen("tcp", late)
		if err != nil {
			t.Errorf("listening on %s: %v", late, err)
			return
		}
		t.Cleanup(func() { _ = l.Close() })
		go proxy(l, target)
	}()
	r = e.Keyledger([]string{"migrate", "up", "--wait", "30s"}, suite.WithDatabase(lateURL))
	<-started
	require.Equal(t, 0, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, store.MigrationStatus{Version: suite.LatestVersion(t), Changed: true}, suite.MigrateStatus(t, r))
	require.Regexp(t, `"msg":"database wait","attempts":([2-9]|[1-9][0-9]),"wait":"30s","reachable":true`, r.Stderr)
}

// proxy forwards every connection accepted on l to target, until l closes.
func proxy(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer up.Close()
			go func() { _, _ = io.Copy(up, c) }()
			_, _ = io.Copy(c, up)
		}()
	}
}
