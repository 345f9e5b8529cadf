package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"slices"

	"github.com/txmq/txmq/adapters/sqlite/internal/migrate"
	"github.com/txmq/txmq/core/sqlmigrate"
)

// Component is the name the jobs tables' migrations are recorded under in txmq_migrations.
const Component = "sqlite_jobs"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the adapter's migration files (NNNN_name.sql at the root), for tools.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrationFiles, "migrations")
	return sub
}

// Migrate creates or upgrades the jobs tables in db's file and turns the file to WAL mode
// (PRAGMA journal_mode=WAL, which stays with the file: readers never wait for the writer). It
// is safe to call from several processes at once: the migrations run in one BEGIN IMMEDIATE
// transaction (SQLite's DDL is transactional), which serialises them, and a no-op when up to
// date. opts is checked and otherwise unused (nil means the defaults).
func Migrate(ctx context.Context, db *sql.DB, opts *Options) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if db == nil {
		return fmt.Errorf("sqlite: Migrate needs a *sql.DB opened with the modernc.org/sqlite driver; pass the app's database")
	}
	ctx, cancel := context.WithTimeout(ctx, o.QueryTimeout)
	defer cancel()
	if err := migrate.Run(ctx, db, Component, Migrations()); err != nil {
		return classify("migrating the jobs tables", err)
	}
	return nil
}

// appliedVersions returns the versions of Component recorded in txmq_migrations; a missing
// table is no versions.
func appliedVersions(ctx context.Context, db *sql.DB) ([]int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'txmq_migrations'`).Scan(&n)
	if err != nil || n == 0 {
		return nil, err
	}
	var out []int
	var v int
	rows, err := db.QueryContext(ctx, "SELECT version FROM txmq_migrations WHERE component = ?", Component)
	err = eachRow(rows, err, []any{&v}, func() error { out = append(out, v); return nil })
	return out, err
}

// missingVersions returns the versions of the adapter's migrations that applied lacks.
func missingVersions(applied []int) []int {
	files, err := sqlmigrate.List(Migrations())
	if err != nil {
		panic("sqlite: the embedded migrations do not list: " + err.Error())
	}
	var out []int
	for _, f := range files {
		if !slices.Contains(applied, f.Version) {
			out = append(out, f.Version)
		}
	}
	return out
}
