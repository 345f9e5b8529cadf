package sqljobs

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/internal/pgmigrate"
)

// Component is the name the jobs tables' migrations are recorded under in txmq_migrations.
const Component = "sqljobs"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the adapter's migration files (NNNN_name.sql at the root), for tools.
func Migrations() fs.FS {
	return pgmigrate.Sub(migrationFiles, "migrations")
}

// Migrate creates or upgrades the jobs tables in opts.Schema (default "txmq"). It is safe to
// call from several processes at once and a no-op when up to date. Only Schema is read from
// opts; nil means the defaults.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts *Options) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if pool == nil {
		return fmt.Errorf("sqljobs: Migrate needs a *pgxpool.Pool; pass the app's pool")
	}
	if _, err := pgmigrate.Migrate(ctx, pool, Migrations(), Component, o.Schema); err != nil {
		return classify(fmt.Sprintf("migrating schema %q", o.Schema), err)
	}
	return nil
}
