package outbox

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/internal/pgmigrate"
)

// Component is the name the outbox's migrations are recorded under in txmq_migrations.
const Component = "outbox"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the outbox's migration files (NNNN_name.sql at the root), for tools.
func Migrations() fs.FS {
	return pgmigrate.Sub(migrationFiles, "migrations")
}

// Migrate creates or upgrades the outbox and dead-letter tables in opts.Schema (default
// "txmq"). It is safe to call from several processes at once and a no-op when up to date.
// Only Schema is read from opts; nil means the defaults.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts *Options) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if pool == nil {
		return fmt.Errorf("outbox: Migrate needs a *pgxpool.Pool")
	}
	if _, err := pgmigrate.Migrate(ctx, pool, Migrations(), Component, o.Schema); err != nil {
		return fmt.Errorf("outbox: migrating schema %q: %w", o.Schema, err)
	}
	return nil
}
