package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
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

// sqlMigrationsTable records applied migrations, per component.
const sqlMigrationsTable = `
CREATE TABLE IF NOT EXISTS txmq_migrations (
	component  TEXT    NOT NULL,
	version    INTEGER NOT NULL,
	applied_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
	PRIMARY KEY (component, version)
)`

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
	if err := migrate(ctx, db); err != nil {
		return classify("migrating the jobs tables", err)
	}
	return nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return fmt.Errorf("turning the file to WAL mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("the file stays in journal mode %q, not WAL (an in-memory database, or a file system without shared memory); use a file on a local disk", mode)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if err := migrateIn(ctx, conn); err != nil {
		rollback(ctx, conn)
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		rollback(ctx, conn)
		return err
	}
	return nil
}

// migrateIn applies the missing migrations inside the caller's transaction.
func migrateIn(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, sqlMigrationsTable); err != nil {
		return err
	}
	applied := map[int]bool{}
	rows, err := conn.QueryContext(ctx, "SELECT version FROM txmq_migrations WHERE component = ?", Component)
	var v int
	if err := eachRow(rows, err, []any{&v}, func() error { applied[v] = true; return nil }); err != nil {
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
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migration %s: %w", f.name, err)
			}
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO txmq_migrations (component, version) VALUES (?, ?)", Component, f.version); err != nil {
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
