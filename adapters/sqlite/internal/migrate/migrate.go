// Package migrate runs the SQLite migrations of the jobs tables (package sqlite) and of the
// outbox tables (package appdb): both record them in one txmq_migrations table, per
// component, so that the two can share a file.
package migrate

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/txmq/txmq/core/sqlmigrate"
)

// table records applied migrations, per component. Both components create it the same way
// (CREATE TABLE IF NOT EXISTS, identical columns).
const table = `
CREATE TABLE IF NOT EXISTS txmq_migrations (
	component  TEXT    NOT NULL,
	version    INTEGER NOT NULL,
	applied_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
	PRIMARY KEY (component, version)
)`

// Run turns db's file to WAL mode (it stays with the file: readers never wait for the
// writer) and applies component's missing migrations from files (NNNN_name.sql at its root)
// in one BEGIN IMMEDIATE transaction: SQLite's DDL is transactional, so processes migrating
// at once are serialised and the later ones find the versions recorded. Errors are the
// driver's, unclassified.
func Run(ctx context.Context, db *sql.DB, component string, files fs.FS) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var mode string
	if err := c.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return fmt.Errorf("turning the file to WAL mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("the file stays in journal mode %q, not WAL (an in-memory database, or a file system without shared memory); use a file on a local disk", mode)
	}
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if err := apply(ctx, c, component, files); err != nil {
		rollback(ctx, c)
		return err
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		rollback(ctx, c)
		return err
	}
	return nil
}

// rollback ends c's transaction, detached from ctx's cancellation; when that fails the
// connection is discarded rather than returned to the pool in an unknown state.
func rollback(ctx context.Context, c *sql.Conn) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := c.ExecContext(rctx, "ROLLBACK"); err != nil {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// apply applies component's missing migrations inside the caller's transaction.
func apply(ctx context.Context, c *sql.Conn, component string, files fs.FS) error {
	if _, err := c.ExecContext(ctx, table); err != nil {
		return err
	}
	return sqlmigrate.Apply(ctx, c, "txmq_migrations", component, files, nil)
}
