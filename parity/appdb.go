package parity

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// AppDB runs the outbox (and its dead letters) in an app database other than PostgreSQL in
// front of the adapter (Options.AppDB): the properties that publish through the outbox
// (transactions, ordering through the outbox, poison rows, dead letters and replay) then run
// there, and so do the pause, schedule and rate-limit properties when the store keeps those
// tables (outbox.ControlDialect); the properties that need the app database on PostgreSQL
// (pgx savepoints and WithTx, the ledger) or a table the store does not keep are reported as
// not supported, never as passed. Its module implements it (the mysql module's tests for
// MySQL/MariaDB), so that this package never requires another database's driver.
type AppDB interface {
	// Name names the database in messages ("mysql").
	Name() string
	// Store opens a Store publishing to o.Backend: in a fresh schema (database) of its own,
	// dropped at the test's end, when same is nil; in the schema of same otherwise (another
	// process on the same tables). It closes the store in t's cleanup.
	Store(t *testing.T, o outbox.Options, same *outbox.Store) *outbox.Store
	// OutboxRows counts the rows in the outbox table of s.
	OutboxRows(t *testing.T, s *outbox.Store) int
	// DB returns the app database handle s is on, for transactions the app manages itself
	// (Store.WithSQLTx).
	DB(t *testing.T, s *outbox.Store) *sql.DB
}

// appDB returns Options.AppDB, nil for PostgreSQL.
func (x *X) appDB() AppDB { return x.opts.AppDB }

// needPostgresAppDB reports the property as not supported when the app database is not
// PostgreSQL (Options.AppDB): it needs what only PostgreSQL has (named in what).
func (x *X) needPostgresAppDB(what string) {
	x.T.Helper()
	if db := x.appDB(); db != nil {
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported with the app database on %s: %s needs PostgreSQL", x.h.Name(), db.Name(), what)
	}
}

// needControl reports the property as not supported when the app database is not PostgreSQL
// (Options.AppDB) and its store does not keep the control table what names (missing: its
// accessor, Store.Pauses, Ticks, Limits or Nodes, returned nil; a dialect without
// outbox.ControlDialect).
func (x *X) needControl(missing bool, what string) {
	x.T.Helper()
	if db := x.appDB(); db != nil && missing {
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported with the app database on %s: its store does not keep %s", x.h.Name(), db.Name(), what)
	}
}

// runInTx runs fn in a transaction of s's app database (Store.RunInTx on PostgreSQL,
// Store.RunInSQLTx on another), fn's context carrying it.
func runInTx(ctx context.Context, s *outbox.Store, fn func(ctx context.Context) error) error {
	if s.Dialect() == "postgres" {
		return s.RunInTx(ctx, func(ctx context.Context, _ pgx.Tx) error { return fn(ctx) })
	}
	return s.RunInSQLTx(ctx, func(ctx context.Context, _ *sql.Tx) error { return fn(ctx) })
}

// storeOn opens a store through Options.AppDB (see X.store).
func (x *X) storeOn(db AppDB, backend core.Backend, o outbox.Options, same *outbox.Store) *outbox.Store {
	o.Backend = backend
	if o.Logger == nil {
		o.Logger = x.logger
	}
	return db.Store(x.T, o, same)
}
