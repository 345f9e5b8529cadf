package mysql

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
const Component = "mysql_jobs"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the adapter's migration files (NNNN_name.sql at the root), for tools.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrationFiles, "migrations")
	return sub
}

// sqlMigrationsTable records applied migrations, per component, in the schema.
const sqlMigrationsTable = `
CREATE TABLE IF NOT EXISTS {{s}}txmq_migrations (
	component  VARCHAR(64) NOT NULL,
	version    INT         NOT NULL,
	applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
	PRIMARY KEY (component, version)
) ENGINE = InnoDB`

// migrateLockWait bounds the wait for another process's migration (GET_LOCK's timeout).
const migrateLockWait = 60

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
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	prefix := qualifier(schema)
	if schema != "" {
		if _, err := conn.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+quoteIdent(schema)); err != nil {
			return err
		}
	}
	lock := "txmq_migrate/" + schema
	lock = lock[:min(len(lock), 64)] // MySQL's longest lock name; a cut name only serialises more
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", lock, migrateLockWait).Scan(&got); err != nil {
		return err
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("another process held the migration lock %q for %d s; try again once it is done", lock, migrateLockWait)
	}
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", lock) }()
	if _, err := conn.ExecContext(ctx, strings.ReplaceAll(sqlMigrationsTable, "{{s}}", prefix)); err != nil {
		return err
	}
	applied := map[int]bool{}
	rows, err := conn.QueryContext(ctx, "SELECT version FROM "+prefix+"txmq_migrations WHERE component = ?", Component)
	if err != nil {
		return err
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return err
		}
		applied[v] = true
	}
	if err := rows.Close(); err != nil {
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
		for _, stmt := range statementsOf(strings.ReplaceAll(f.sql, "{{schema}}", prefix)) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migration %s: %w", f.name, err)
			}
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO "+prefix+"txmq_migrations (component, version) VALUES (?, ?)", Component, f.version); err != nil {
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
