package pgmigrate

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Component is one package's migrations (the outbox's, the sqljobs adapter's): what its
// exported Migrate and Migrations share.
type Component struct {
	// Name records the migrations in txmq_migrations and starts error messages ("outbox").
	Name string
	// Files are the NNNN_name.sql files at the root (see Sub).
	Files fs.FS
	// Wrap turns a failure into the package's error (op says what failed). Nil: the error
	// prefixed with Name and op.
	Wrap func(op string, err error) error
}

// Migrate applies c's pending migrations through pool to the schema that schema returns (the
// package's options, read and checked; its error is returned as it is), as the package's
// exported Migrate promises: safe from several processes at once, a no-op when up to date. A
// nil pool is an error.
func (c Component) Migrate(ctx context.Context, pool *pgxpool.Pool, schema func() (string, error)) error {
	name, err := schema()
	if err != nil {
		return err
	}
	return c.apply(ctx, pool, name)
}

func (c Component) apply(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if pool == nil {
		return fmt.Errorf("%s: Migrate needs a *pgxpool.Pool; pass the app's pool", c.Name)
	}
	if _, err := Migrate(ctx, pool, c.Files, c.Name, schema); err != nil {
		op := fmt.Sprintf("migrating schema %q", schema)
		if c.Wrap != nil {
			return c.Wrap(op, err)
		}
		return fmt.Errorf("%s: %s: %w", c.Name, op, err)
	}
	return nil
}
