package mysql

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	migrations "github.com/txmq/txmq/adapters/mysql/internal/migrate"
)

// Component is the name the jobs tables' migrations are recorded under in txmq_migrations.
const Component = "mysql_jobs"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the adapter's migration files (NNNN_name.sql at the root), for tools.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrationFiles, "migrations")
	return sub
}

// Migrate creates or upgrades the jobs tables in opts.Schema (default: the connection's
// database; a named one is created when missing). It is safe to call from several processes
// at once (they serialise on GET_LOCK, a session lock held on one connection) and a no-op
// when up to date. MySQL commits DDL implicitly, so a migration is not one transaction: each
// file's statements are written to be re-runnable (CREATE ... IF NOT EXISTS), and a file is
// recorded in txmq_migrations only once all of them ran. Only Schema is read from opts; nil
// means the defaults.
func Migrate(ctx context.Context, db *sql.DB, opts *Options) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if db == nil {
		return fmt.Errorf("mysql: Migrate needs a *sql.DB opened with the mysql driver; pass the app's database")
	}
	op := "migrating the jobs tables"
	if o.Schema != "" {
		op = fmt.Sprintf("migrating the jobs tables of database %q", o.Schema)
	}
	if err := migrate(ctx, db, o.Schema); err != nil {
		return classify(op, err)
	}
	return nil
}

func migrate(ctx context.Context, db *sql.DB, schema string) error {
	return migrations.Run(ctx, db, schema, Component, Migrations())
}

// appliedVersions returns the versions of Component recorded in the schema's
// txmq_migrations; a missing table is no versions.
func appliedVersions(ctx context.Context, db *sql.DB, schema string) ([]int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = 'txmq_migrations'`, schema).Scan(&n)
	if err != nil || n == 0 {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT version FROM "+qualifier(schema)+"txmq_migrations WHERE component = ?", Component)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
