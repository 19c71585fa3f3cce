package store

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/keyledger/keyledger/migrations"
)

// DefaultOperatorRole is the role the migrations grant journal rights to when
// no other is named.
const DefaultOperatorRole = "keyledger_operator"

// Schema is the PostgreSQL schema that holds the journal.
const Schema = "keyledger"

// MigrateDirection is what `keyledger migrate` was asked to do.
type MigrateDirection string

const (
	// MigrateUp applies every migration not yet applied.
	MigrateUp MigrateDirection = "up"
	// MigrateDown rolls back the newest applied migration.
	MigrateDown MigrateDirection = "down"
	// MigrateVersion only reports the applied version.
	MigrateVersion MigrateDirection = "version"
)

// MigrationStatus is the schema version after a migrate command.
type MigrationStatus struct {
	Version uint `json:"version"`
	Dirty   bool `json:"dirty"`
	Changed bool `json:"changed"`
}

// Migrate runs the embedded migrations as the schema owner. operatorRole is
// the role granted journal rights (DefaultOperatorRole when empty); it must
// already exist.
func Migrate(ctx context.Context, databaseURL string, dir MigrateDirection, operatorRole string) (MigrationStatus, error) {
	if operatorRole == "" {
		operatorRole = DefaultOperatorRole
	}
	connCfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return MigrationStatus{}, ErrInvalidURL
	}
	connCfg.RuntimeParams["keyledger.operator_role"] = operatorRole
	db := stdlib.OpenDB(*connCfg)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return MigrationStatus{}, &UnreachableError{Err: redact(err)}
	}
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS `+Schema); err != nil {
		return MigrationStatus{}, fmt.Errorf("creating schema %s: %w", Schema, redact(err))
	}
	driver, err := migratepgx.WithInstance(db, &migratepgx.Config{
		MigrationsTable:       `"` + Schema + `"."schema_migrations"`,
		MigrationsTableQuoted: true,
	})
	if err != nil {
		return MigrationStatus{}, fmt.Errorf("preparing migration driver: %w", redact(err))
	}
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return MigrationStatus{}, fmt.Errorf("reading embedded migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
	if err != nil {
		return MigrationStatus{}, fmt.Errorf("preparing migrations: %w", err)
	}
	var status MigrationStatus
	switch dir {
	case MigrateUp:
		err = m.Up()
	case MigrateDown:
		err = m.Steps(-1)
	case MigrateVersion:
	default:
		return status, fmt.Errorf("unknown migrate direction %q (want up, down or version)", dir)
	}
	switch {
	case err == nil:
		status.Changed = dir != MigrateVersion
	case errors.Is(err, migrate.ErrNoChange):
	case dir == MigrateDown && errors.Is(err, os.ErrNotExist):
		// Nothing is applied: there is no step to roll back.
	default:
		return status, fmt.Errorf("migrating %s: %w", dir, err)
	}
	v, dirty, err := m.Version()
	if err != nil && !errors.Is(err, migrate.ErrNilVersion) {
		return status, fmt.Errorf("reading schema version: %w", err)
	}
	status.Version, status.Dirty = v, dirty
	return status, nil
}
