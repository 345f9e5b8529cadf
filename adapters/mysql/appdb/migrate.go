package appdb

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"regexp"

	migrations "github.com/txmq/txmq/adapters/mysql/internal/migrate"
	"github.com/txmq/txmq/core"
)

// Component is the name the outbox's migrations on MySQL are recorded under in
// txmq_migrations (beside the jobs tables', "mysql_jobs").
const Component = "mysql_outbox"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the migration files (NNNN_name.sql at the root), for tools.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrationFiles, "migrations")
	return sub
}

// schemaPattern is what a database name for txmq's tables may be.
var schemaPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,49}$`)

func checkSchema(schema string) error {
	if schema != "" && !schemaPattern.MatchString(schema) {
		return fmt.Errorf("%w: mysql appdb: schema (database) %q: use letters, digits and _ (at most 50, not starting with a digit)", core.ErrInvalidConfig, schema)
	}
	return nil
}

// qualifier is the table name prefix of a schema: "`db`." or "".
func qualifier(schema string) string { return migrations.Qualifier(schema) }

// Migrate creates or upgrades the outbox and dead-letter tables in schema (a database name,
// created when missing; "" for the connection's database). It is safe to call from several
// processes at once (they serialise on GET_LOCK) and a no-op when up to date. MySQL commits
// DDL implicitly: each statement is re-runnable (IF NOT EXISTS), and a file is recorded in
// txmq_migrations once all of them ran.
func Migrate(ctx context.Context, db *sql.DB, schema string) error {
	if db == nil {
		return fmt.Errorf("%w: mysql appdb: Migrate needs a *sql.DB opened with the mysql driver", core.ErrInvalidConfig)
	}
	if err := checkSchema(schema); err != nil {
		return err
	}
	if err := migrate(ctx, db, schema); err != nil {
		return fmt.Errorf("mysql appdb: migrating the outbox tables of database %q: %w", schema, err)
	}
	return nil
}

func migrate(ctx context.Context, db *sql.DB, schema string) error {
	return migrations.Run(ctx, db, schema, Component, Migrations())
}
