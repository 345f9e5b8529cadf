package appdb

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/txmq/txmq/adapters/sqlite/internal/migrate"
	"github.com/txmq/txmq/core"
)

// Component is the name the outbox's migrations on SQLite are recorded under in
// txmq_migrations (beside the jobs tables', "sqlite_jobs", when the jobs live in the same
// file).
const Component = "sqlite_outbox"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the migration files (NNNN_name.sql at the root), for tools.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrationFiles, "migrations")
	return sub
}

// Migrate creates or upgrades the outbox and dead-letter tables in db's file and turns the
// file to WAL mode (readers never wait for the writer; it stays with the file). It is safe to
// call from several processes at once: the missing migrations run in one BEGIN IMMEDIATE
// transaction (SQLite's DDL is transactional), which serialises them, and the second finds
// them recorded; it is a no-op when up to date.
func Migrate(ctx context.Context, db *sql.DB) error {
	if db == nil {
		return fmt.Errorf("%w: sqlite appdb: Migrate needs a *sql.DB opened with modernc.org/sqlite (appdb.OpenDB)", core.ErrInvalidConfig)
	}
	err := withBusyRetry(ctx, func() error { return migrate.Run(ctx, db, Component, Migrations()) })
	return classify("migrating the outbox tables", err)
}
