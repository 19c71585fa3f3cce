package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/keyledger/keyledger/migrations"
)

// DefaultOperatorRole is the shared operator role of migrations 1 to 4: they
// grant it journal rights when it exists, and migration 5 revokes them
// (each namespace's role is granted with Store.Grant instead). Deprecated:
// kept so that an existing journal's role is found by its old name.
const DefaultOperatorRole = "keyledger_operator"

// Schema is the PostgreSQL schema that holds the journal.
const Schema = "keyledger"

// migrationsTable is golang-migrate's version table, inside Schema.
const migrationsTable = `"` + Schema + `"."schema_migrations"`

// MigrateDirection is what `keyledger migrate` was asked to do.
type MigrateDirection string

const (
	// MigrateUp applies every migration not yet applied.
	MigrateUp MigrateDirection = "up"
	// MigrateDown rolls back the newest applied migration.
	MigrateDown MigrateDirection = "down"
	// MigrateVersion only reports the applied version; it creates nothing.
	MigrateVersion MigrateDirection = "version"
	// MigrateRecover clears the dirty mark an earlier keyledger left when
	// a migration failed: the version goes back to the one before it.
	MigrateRecover MigrateDirection = "recover"
)

// MigrationStatus is the schema version after a migrate command.
type MigrationStatus struct {
	Version uint `json:"version"`
	Dirty   bool `json:"dirty"`
	Changed bool `json:"changed"`
}

// Reasons of a PreconditionError.
const (
	// ReasonSchemaCreateDenied: the connecting role may not create the schema or objects in it.
	ReasonSchemaCreateDenied = "schema-create-denied"
	// ReasonNotSchemaOwner: the connecting role may not even read the version table.
	ReasonNotSchemaOwner = "not-schema-owner"
	// ReasonSchemaDirty: an earlier keyledger left the schema marked dirty.
	ReasonSchemaDirty = "schema-dirty"
	// ReasonSchemaNotDirty: recover was asked for a schema that is not dirty.
	ReasonSchemaNotDirty = "schema-not-dirty"
	// ReasonMigrationFailed: a migration failed and was rolled back whole.
	ReasonMigrationFailed = "migration-failed"
	// ReasonJournalNotEmpty: migrate down would drop journal rows
	// (operations and records at step 1, the namespace grants and their
	// history at step 5) and was not told to destroy them.
	ReasonJournalNotEmpty = "journal-not-empty"
)

// destroyRefused is the SQLSTATE a down migration raises when it would drop
// journal rows and the session did not set keyledger.destroy_journal_records.
const destroyRefused = "KL001"

// PreconditionError says what a migrate command found missing before it
// changed anything (or, for ReasonMigrationFailed, that the failed migration
// was rolled back whole), and how to fix it. Msg and Fix name no DSN, host
// or user name.
type PreconditionError struct {
	Reason string
	Msg    string
	Fix    string
	// Unavailable is true when retrying later may succeed without a change
	// on the user's side (exit 69 rather than 64).
	Unavailable bool
	// Permission is true when what is refused is a role's rights (a
	// superuser, a BYPASSRLS role or the owner offered as a namespace
	// role): exit 77 rather than 64.
	Permission bool
}

func (e *PreconditionError) Error() string { return e.Msg }

// MigrateOptions adjust a migrate command.
type MigrateOptions struct {
	// OperatorRole names the shared operator role of migrations 1 to 4
	// (DefaultOperatorRole when empty). Deprecated: nothing requires it to
	// exist; migrations 1 to 4 grant it rights when it does, and migration 5
	// revokes them.
	OperatorRole string
	// DestroyJournalRecords lets migrate down drop tables that hold journal
	// rows (operations and records at step 1, namespace grants and their
	// history at step 5). Without it such a step is refused
	// (ReasonJournalNotEmpty) and nothing is dropped.
	DestroyJournalRecords bool
	// Source holds the migration files (migrations.FS when nil).
	Source fs.FS
}

// Migrate runs the embedded migrations as the schema owner. operatorRole is
// the deprecated shared operator role (see MigrateOptions.OperatorRole).
func Migrate(ctx context.Context, databaseURL string, dir MigrateDirection, operatorRole string) (MigrationStatus, error) {
	return MigrateWith(ctx, databaseURL, dir, MigrateOptions{OperatorRole: operatorRole})
}

// MigrateSource is Migrate with the migration files taken from src (tests
// add a failing migration to prove that a failure leaves nothing behind).
func MigrateSource(ctx context.Context, databaseURL string, dir MigrateDirection, operatorRole string, src fs.FS) (MigrationStatus, error) {
	return MigrateWith(ctx, databaseURL, dir, MigrateOptions{OperatorRole: operatorRole, Source: src})
}

// MigrateWith runs a migrate command.
//
// Before changing anything, up checks its preconditions: the connecting
// role may create the schema (or objects in it), and the schema is not
// marked dirty. Each migration then runs in one transaction together with
// the version row, so a failing migration leaves the version as it was and
// never dirty. A down step that would drop journal rows refuses inside that
// transaction, after locking the tables, unless opts.DestroyJournalRecords.
func MigrateWith(ctx context.Context, databaseURL string, dir MigrateDirection, opts MigrateOptions) (MigrationStatus, error) {
	opts = opts.withDefaults()
	if err := dir.check(); err != nil {
		return MigrationStatus{}, err
	}
	db, err := openForMigrate(ctx, databaseURL, opts)
	if err != nil {
		return MigrationStatus{}, err
	}
	defer db.Close()
	cur, err := readVersion(ctx, db)
	if err != nil {
		return MigrationStatus{}, err
	}
	switch dir {
	case MigrateVersion:
		return cur.MigrationStatus, nil
	case MigrateRecover:
		return recoverDirty(ctx, db, cur, opts.Source)
	case MigrateDown:
		if !cur.exists {
			return cur.MigrationStatus, nil // nothing applied, nothing created
		}
	}
	if cur.Dirty {
		return cur.MigrationStatus, dirtyError(cur)
	}
	if dir == MigrateUp {
		if err := prepareSchema(ctx, db); err != nil {
			return cur.MigrationStatus, err
		}
	}
	m, err := newMigrate(ctx, db, opts.Source)
	if err != nil {
		return cur.MigrationStatus, err
	}
	return settleMigration(ctx, db, dir, cur, migrateStep(m, dir))
}

// withDefaults fills what opts leaves empty: DefaultOperatorRole and the
// embedded migrations.
func (opts MigrateOptions) withDefaults() MigrateOptions {
	if opts.OperatorRole == "" {
		opts.OperatorRole = DefaultOperatorRole
	}
	if opts.Source == nil {
		opts.Source = migrations.FS
	}
	return opts
}

// check refuses a direction that is not one of the four.
func (dir MigrateDirection) check() error {
	switch dir {
	case MigrateUp, MigrateDown, MigrateVersion, MigrateRecover:
		return nil
	}
	return fmt.Errorf("unknown migrate direction %q (want up, down, version or recover)", dir)
}

// openForMigrate connects as the schema owner, the session carrying what
// the migrations read: the deprecated operator role and, when opts says
// so, leave to destroy journal records. A DSN that does not parse is
// ErrInvalidURL; a database that does not answer, *UnreachableError.
func openForMigrate(ctx context.Context, databaseURL string, opts MigrateOptions) (*sql.DB, error) {
	connCfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, ErrInvalidURL
	}
	connCfg.RuntimeParams["keyledger.operator_role"] = opts.OperatorRole
	if opts.DestroyJournalRecords {
		connCfg.RuntimeParams["keyledger.destroy_journal_records"] = "yes"
	}
	db := stdlib.OpenDB(*connCfg)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, &UnreachableError{Err: redact(err)}
	}
	return db, nil
}

// dirtyError refuses to migrate a schema an earlier keyledger left dirty.
func dirtyError(cur schemaVersion) error {
	return &PreconditionError{Reason: ReasonSchemaDirty,
		Msg: fmt.Sprintf("the journal schema is marked dirty at version %d: a migration run by an earlier keyledger failed", cur.Version),
		Fix: "run keyledger migrate recover (each migration ran in one transaction, so the failed one left nothing behind), then keyledger migrate up"}
}

// prepareSchema checks what migrate up needs (checkUp), then creates the
// journal's schema when it is not there yet.
func prepareSchema(ctx context.Context, db *sql.DB) error {
	if err := checkUp(ctx, db); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS `+Schema); err != nil {
		return fmt.Errorf("creating schema %s: %w", Schema, redact(err))
	}
	return nil
}

// migrateStep runs dir's migrations: up applies every one not yet
// applied, down rolls back the newest.
func migrateStep(m *migrate.Migrate, dir MigrateDirection) error {
	if dir == MigrateUp {
		return m.Up()
	}
	return m.Steps(-1)
}

// settleMigration reads what a migration step that returned err left: a
// change, nothing to change, a refusal (nothing dropped), or a migration
// that failed and was rolled back whole; then the version it left.
func settleMigration(ctx context.Context, db *sql.DB, dir MigrateDirection, cur schemaVersion, err error) (MigrationStatus, error) {
	var status MigrationStatus
	var failed *migrationError
	var refused *PreconditionError
	switch {
	case err == nil:
		status.Changed = true
	case errors.Is(err, migrate.ErrNoChange):
	case dir == MigrateDown && errors.Is(err, os.ErrNotExist):
		// Nothing is applied: there is no step to roll back.
	case errors.As(err, &refused):
		return cur.MigrationStatus, refused
	case errors.As(err, &failed):
		return rolledBack(ctx, db, dir, failed)
	default:
		return status, fmt.Errorf("migrating %s: %w", dir, err)
	}
	after, err := readVersion(ctx, db)
	if err != nil {
		return status, err
	}
	status.Version, status.Dirty = after.Version, after.Dirty
	return status, nil
}

// rolledBack reports a migration that failed: its transaction rolled back
// whole, so the schema stays at the version read now, never dirty.
func rolledBack(ctx context.Context, db *sql.DB, dir MigrateDirection, failed *migrationError) (MigrationStatus, error) {
	after, err := readVersion(ctx, db)
	if err != nil {
		return MigrationStatus{}, err
	}
	return after.MigrationStatus, &PreconditionError{Reason: ReasonMigrationFailed,
		Msg: fmt.Sprintf("migration %d failed and was rolled back whole (%v); the schema stays at version %d, not dirty",
			failed.version, failed.err, after.Version),
		Fix: "fix what the database error names (rights, a conflicting object), then run keyledger migrate " + string(dir) + " again"}
}

// schemaVersion is what the version table says, and whether it exists.
type schemaVersion struct {
	MigrationStatus
	exists bool
}

// readVersion reads the version table without creating anything.
func readVersion(ctx context.Context, db *sql.DB) (schemaVersion, error) {
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, migrationsTable).Scan(&exists); err != nil {
		return schemaVersion{}, fmt.Errorf("reading schema version: %w", redact(err))
	}
	if !exists {
		return schemaVersion{}, nil
	}
	var v int64
	var dirty bool
	err := db.QueryRowContext(ctx, `SELECT version, dirty FROM `+migrationsTable+` LIMIT 1`).Scan(&v, &dirty)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return schemaVersion{exists: true}, nil
	case isInsufficientPrivilege(err):
		return schemaVersion{}, &PreconditionError{Reason: ReasonNotSchemaOwner,
			Msg: "the connecting role may not read the journal schema's version: it is not the schema owner; nothing was changed",
			Fix: "run keyledger migrate as the role that owns schema " + Schema + " (runs use their namespace's role, migrations the owner)"}
	case err != nil:
		return schemaVersion{}, fmt.Errorf("reading schema version: %w", redact(err))
	}
	if v < 0 {
		v = 0
	}
	return schemaVersion{MigrationStatus: MigrationStatus{Version: uint(v), Dirty: dirty}, exists: true}, nil
}

// checkUp checks what migrate up needs before it changes anything. No
// operator role need exist (migration 5 has each namespace's role granted
// by keyledger journal grant).
func checkUp(ctx context.Context, db *sql.DB) error {
	var schemaExists, mayCreate bool
	err := db.QueryRowContext(ctx, `SELECT
		EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1),
		CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)
		     THEN has_schema_privilege($1, 'CREATE')
		     ELSE has_database_privilege(current_database(), 'CREATE') END`,
		Schema).Scan(&schemaExists, &mayCreate)
	if err != nil {
		return fmt.Errorf("checking migration preconditions: %w", redact(err))
	}
	if !mayCreate {
		where := "create schema " + Schema + " in this database"
		fix := "run keyledger migrate up as the database owner, or GRANT CREATE ON DATABASE to the role it connects as"
		if schemaExists {
			where = "create objects in the existing schema " + Schema
			fix = "run keyledger migrate up as the owner of schema " + Schema + ", or GRANT CREATE ON SCHEMA " + Schema + " to the role it connects as"
		}
		return &PreconditionError{Reason: ReasonSchemaCreateDenied,
			Msg: "the connecting role may not " + where + "; nothing was changed", Fix: fix}
	}
	return nil
}

// recoverDirty clears a dirty mark: each migration runs as one transaction
// (earlier keyledger versions sent each file as one simple-protocol query,
// which PostgreSQL also runs as one transaction), so a dirty version N means
// migration N did not commit and the schema is at the version before it.
func recoverDirty(ctx context.Context, db *sql.DB, cur schemaVersion, src fs.FS) (MigrationStatus, error) {
	if !cur.Dirty {
		return cur.MigrationStatus, &PreconditionError{Reason: ReasonSchemaNotDirty,
			Msg: fmt.Sprintf("the journal schema is at version %d and not dirty: there is nothing to recover", cur.Version),
			Fix: "run keyledger migrate up"}
	}
	s, err := iofs.New(src, ".")
	if err != nil {
		return cur.MigrationStatus, fmt.Errorf("reading embedded migrations: %w", err)
	}
	defer s.Close()
	prev, err := s.Prev(cur.Version)
	target := int64(prev) //nolint:gosec // G115: migration versions are small numbers from embedded file names
	switch {
	case errors.Is(err, os.ErrNotExist):
		target = int64(database.NilVersion)
	case err != nil:
		return cur.MigrationStatus, fmt.Errorf("dirty version %d is not one of this keyledger's migrations: %w", cur.Version, err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return cur.MigrationStatus, fmt.Errorf("recovering: %w", redact(err))
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if err := writeVersion(ctx, tx, target); err != nil {
		return cur.MigrationStatus, err
	}
	if err := tx.Commit(); err != nil {
		return cur.MigrationStatus, fmt.Errorf("recovering: %w", redact(err))
	}
	st := MigrationStatus{Changed: true}
	if target > 0 {
		st.Version = uint(target)
	}
	return st, nil
}

func writeVersion(ctx context.Context, tx *sql.Tx, version int64) error {
	if _, err := tx.ExecContext(ctx, `TRUNCATE `+migrationsTable); err != nil {
		return fmt.Errorf("writing schema version: %w", redact(err))
	}
	if version >= 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+migrationsTable+` (version, dirty) VALUES ($1, false)`, version); err != nil {
			return fmt.Errorf("writing schema version: %w", redact(err))
		}
	}
	return nil
}

func newMigrate(ctx context.Context, db *sql.DB, src fs.FS) (*migrate.Migrate, error) {
	driver, err := migratepgx.WithInstance(db, &migratepgx.Config{
		MigrationsTable:       migrationsTable,
		MigrationsTableQuoted: true,
	})
	if err != nil {
		return nil, fmt.Errorf("preparing migration driver: %w", redact(err))
	}
	s, err := iofs.New(src, ".")
	if err != nil {
		return nil, fmt.Errorf("reading embedded migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", s, "pgx5", &atomicDriver{Driver: driver, ctx: ctx, db: db})
	if err != nil {
		return nil, fmt.Errorf("preparing migrations: %w", err)
	}
	return m, nil
}

// atomicDriver runs each migration and its version row in one transaction.
// golang-migrate marks the target version dirty, runs the file, then marks
// it clean, in three transactions: a failure in between leaves the schema
// dirty although PostgreSQL rolled the file back. Here the dirty mark is not
// written at all; Run executes the file and writes the clean version in
// one transaction, which commits whole or not at all. Migrations must
// therefore be transactional (no CREATE INDEX CONCURRENTLY and the like).
type atomicDriver struct {
	database.Driver
	ctx context.Context
	db  *sql.DB
	// pending is the version golang-migrate is about to run (its dirty mark).
	pending int
	// written is the version Run has committed.
	written *int
}

func (d *atomicDriver) SetVersion(version int, dirty bool) error {
	if dirty {
		d.pending, d.written = version, nil
		return nil
	}
	if d.written != nil && *d.written == version {
		return nil // committed with the migration
	}
	// A version change without a body (golang-migrate moves over files
	// with no SQL): one transaction too.
	return d.commit(version, nil)
}

func (d *atomicDriver) Run(migration io.Reader) error {
	body, err := io.ReadAll(migration)
	if err != nil {
		return err
	}
	if err := d.commit(d.pending, body); err != nil {
		return err
	}
	v := d.pending
	d.written = &v
	return nil
}

// commit runs body (if any) and writes version, in one transaction.
func (d *atomicDriver) commit(version int, body []byte) error {
	tx, err := d.db.BeginTx(d.ctx, nil)
	if err != nil {
		return fmt.Errorf("starting migration transaction: %w", redact(err))
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if len(body) > 0 {
		// No arguments: pgx sends the file with the simple protocol, so it
		// may hold several statements.
		if _, err := tx.ExecContext(d.ctx, string(body)); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == destroyRefused {
				return &PreconditionError{Reason: ReasonJournalNotEmpty,
					Msg: pgErr.Message + "; nothing was dropped",
					Fix: "keep the journal (it is the record of what keyledger did), or, to destroy it with its records, " +
						"run keyledger migrate down --destroy-journal-records"}
			}
			return &migrationError{version: version, err: describePG(err)}
		}
	}
	if err := writeVersion(d.ctx, tx, int64(version)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return &migrationError{version: version, err: describePG(err)}
	}
	return nil
}

// migrationError is a migration that failed and was rolled back.
type migrationError struct {
	version int
	err     error
}

func (e *migrationError) Error() string { return fmt.Sprintf("migration %d: %v", e.version, e.err) }
func (e *migrationError) Unwrap() error { return e.err }

func isInsufficientPrivilege(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// describePG keeps a server error's code and message (they name SQL
// objects, never the connection); anything else is redacted.
func describePG(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Errorf("server error %s: %s", pgErr.Code, pgErr.Message)
	}
	return redact(err)
}
