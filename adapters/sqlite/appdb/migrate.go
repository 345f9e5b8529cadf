package appdb

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

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

// migrationsTable records applied migrations, per component: the same table the sqlite jobs
// adapter creates (CREATE TABLE IF NOT EXISTS, identical columns), so both share it.
const migrationsTable = `
CREATE TABLE IF NOT EXISTS txmq_migrations (
	component  TEXT    NOT NULL,
	version    INTEGER NOT NULL,
	applied_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
	PRIMARY KEY (component, version)
)`

// Migrate creates or upgrades the outbox and dead-letter tables in db's file and turns the
// file to WAL mode (readers never wait for the writer; it stays with the file). It is safe to
// call from several processes at once: the missing migrations run in one BEGIN IMMEDIATE
// transaction (SQLite's DDL is transactional), which serialises them, and the second finds
// them recorded; it is a no-op when up to date.
func Migrate(ctx context.Context, db *sql.DB) error {
	if db == nil {
		return fmt.Errorf("%w: sqlite appdb: Migrate needs a *sql.DB opened with modernc.org/sqlite (appdb.OpenDB)", core.ErrInvalidConfig)
	}
	err := withBusyRetry(ctx, func() error { return migrate(ctx, db) })
	return classify("migrating the outbox tables", err)
}

func migrate(ctx context.Context, db *sql.DB) error {
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
	if err := migrateIn(ctx, c); err != nil {
		rollback(ctx, c)
		return err
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		rollback(ctx, c)
		return err
	}
	return nil
}

// migrateIn applies the missing migrations inside the caller's transaction.
func migrateIn(ctx context.Context, c *sql.Conn) error {
	if _, err := c.ExecContext(ctx, migrationsTable); err != nil {
		return err
	}
	applied := map[int]bool{}
	rs, err := c.QueryContext(ctx, "SELECT version FROM txmq_migrations WHERE component = ?", Component)
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
	files, err := migrationList()
	if err != nil {
		return err
	}
	for _, f := range files {
		if applied[f.version] {
			continue
		}
		for _, stmt := range statementsOf(f.sql) {
			if _, err := c.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migration %s: %w", f.name, err)
			}
		}
		if _, err := c.ExecContext(ctx, "INSERT INTO txmq_migrations (component, version) VALUES (?, ?)", Component, f.version); err != nil {
			return fmt.Errorf("recording migration %s: %w", f.name, err)
		}
	}
	return nil
}

// migrationFile is one NNNN_name.sql file.
type migrationFile struct {
	name    string
	version int
	sql     string
}

// migrationList returns the embedded migrations in version order.
func migrationList() ([]migrationFile, error) {
	entries, err := fs.ReadDir(Migrations(), ".")
	if err != nil {
		return nil, err
	}
	var out []migrationFile
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration file %q is not named NNNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(Migrations(), e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migrationFile{name: e.Name(), version: v, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// statementsOf splits a migration file into statements: each ends with ';' at the end of a
// line; comment lines are dropped.
func statementsOf(file string) []string {
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
