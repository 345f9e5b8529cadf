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
	"sort"
	"strconv"
	"strings"
	"time"
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
	applied := map[int]bool{}
	rs, err := c.QueryContext(ctx, "SELECT version FROM txmq_migrations WHERE component = ?", component)
	if err != nil {
		return err
	}
	for rs.Next() {
		var v int
		if err := rs.Scan(&v); err != nil {
			rs.Close()
			return err
		}
		applied[v] = true
	}
	if err := rs.Close(); err != nil {
		return err
	}
	list, err := List(files)
	if err != nil {
		return err
	}
	for _, f := range list {
		if applied[f.Version] {
			continue
		}
		for _, stmt := range Statements(f.SQL) {
			if _, err := c.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migration %s: %w", f.Name, err)
			}
		}
		if _, err := c.ExecContext(ctx, "INSERT INTO txmq_migrations (component, version) VALUES (?, ?)", component, f.Version); err != nil {
			return fmt.Errorf("recording migration %s: %w", f.Name, err)
		}
	}
	return nil
}

// File is one NNNN_name.sql migration.
type File struct {
	Name    string
	Version int
	SQL     string
}

// List returns the migrations of files (NNNN_name.sql at its root) in version order.
func List(files fs.FS) ([]File, error) {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, err
	}
	var out []File
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration file %q is not named NNNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(files, e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, File{Name: e.Name(), Version: v, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Statements splits a migration file into statements: each ends with ';' at the end of a
// line; comment lines are dropped.
func Statements(file string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.SplitSeq(file, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") || trimmed == "" {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
