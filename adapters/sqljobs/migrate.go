package sqljobs

import (
	"context"
	"embed"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/internal/pgmigrate"
)

// Component is the name the jobs tables' migrations are recorded under in txmq_migrations.
const Component = "sqljobs"

//go:embed migrations/*.sql
var migrationFiles embed.FS

var migrations = pgmigrate.Component{Name: Component, Files: pgmigrate.Sub(migrationFiles, "migrations"), Wrap: classify}

// Migrations returns the adapter's migration files (NNNN_name.sql at the root), for tools.
func Migrations() fs.FS { return migrations.Files }

// Migrate creates or upgrades the jobs tables in opts.Schema (default "txmq"). It is safe to
// call from several processes at once and a no-op when up to date. Only Schema is read from
// opts; nil means the defaults.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts *Options) error {
	return migrations.Migrate(ctx, pool, func() (string, error) { o, err := opts.withDefaults(); return o.Schema, err })
}
