package appdb

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"strings"

	"github.com/txmq/txmq/core"
)

// Component is the name the outbox's migrations on MySQL are recorded under in
// txmq_migrations (beside the jobs tables', "mysql_jobs").
const Component = "mysql_outbox"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the migration files (NNNN_name.sql at the root), for tools.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrationFiles, "migrations")
	return sub
}

// schemaPattern is what a database name for txmq's tables may be.
var schemaPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,49}$`)

func checkSchema(schema string) error {
	if schema != "" && !schemaPattern.MatchString(schema) {
		return fmt.Errorf("%w: mysql appdb: schema (database) %q: use letters, digits and _ (at most 50, not starting with a digit)", core.ErrInvalidConfig, schema)
	}
	return nil
}

// qualifier is the table name prefix of a schema: "`db`." or "".
func qualifier(schema string) string {
	if schema == "" {
		return ""
	}
	return "`" + schema + "`."
}

// migrateLockWait bounds the wait for another process's migration (GET_LOCK's timeout, s).
const migrateLockWait = 60

// Migrate creates or upgrades the outbox and dead-letter tables in schema (a database name,
// created when missing; "" for the connection's database). It is safe to call from several
// processes at once (they serialise on GET_LOCK) and a no-op when up to date. MySQL commits
// DDL implicitly: each statement is re-runnable (IF NOT EXISTS), and a file is recorded in
// txmq_migrations once all of them ran.
func Migrate(ctx context.Context, db *sql.DB, schema string) error {
	if db == nil {
		return fmt.Errorf("%w: mysql appdb: Migrate needs a *sql.DB opened with the mysql driver", core.ErrInvalidConfig)
	}
	if err := checkSchema(schema); err != nil {
		return err
	}
	if err := migrate(ctx, db, schema); err != nil {
		return fmt.Errorf("mysql appdb: migrating the outbox tables of database %q: %w", schema, err)
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
		if _, err := conn.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+schema+"`"); err != nil {
			return err
		}
	}
	lock := ("txmq_migrate/" + schema)
	lock = lock[:min(len(lock), 64)]
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", lock, migrateLockWait).Scan(&got); err != nil {
		return err
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("another process held the migration lock %q for %d s; try again once it is done", lock, migrateLockWait)
	}
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", lock) }()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+prefix+`txmq_migrations (
	component  VARCHAR(64) NOT NULL,
	version    INT         NOT NULL,
	applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
	PRIMARY KEY (component, version)
) ENGINE = InnoDB`); err != nil {
		return err
	}
	entries, err := fs.ReadDir(Migrations(), ".")
	if err != nil {
		return err
	}
	for i, e := range entries { // ReadDir sorts by name: NNNN_ order
		version := i + 1
		var done int
		if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+prefix+"txmq_migrations WHERE component = ? AND version = ?", Component, version).Scan(&done); err != nil {
			return err
		}
		if done > 0 {
			continue
		}
		b, err := fs.ReadFile(Migrations(), e.Name())
		if err != nil {
			return err
		}
		for _, stmt := range statements(strings.ReplaceAll(string(b), "{{schema}}", prefix)) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migration %s: %w", e.Name(), err)
			}
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO "+prefix+"txmq_migrations (component, version) VALUES (?, ?)", Component, version); err != nil {
			return fmt.Errorf("recording migration %s: %w", e.Name(), err)
		}
	}
	return nil
}

// statements splits a migration file at the semicolons that end a line, dropping comment
// lines.
func statements(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
