// Package migrate runs the MySQL module's embedded migrations (the jobs tables of package
// mysql, the outbox tables of package appdb): NNNN_name.sql files applied in version order,
// each recorded per component in the schema's txmq_migrations once all its statements ran.
// MySQL commits DDL implicitly, so a file is not one transaction: its statements are written to
// be re-runnable (CREATE ... IF NOT EXISTS). Processes migrating at once serialise on GET_LOCK,
// a session lock held on one connection.
package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strings"

	"github.com/txmq/txmq/core/sqlmigrate"
)

// lockWait bounds the wait for another process's migration (GET_LOCK's timeout, in seconds).
const lockWait = 60

// sqlMigrationsTable records applied migrations, per component, in the schema.
const sqlMigrationsTable = `
CREATE TABLE IF NOT EXISTS {{s}}txmq_migrations (
	component  VARCHAR(64) NOT NULL,
	version    INT         NOT NULL,
	applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
	PRIMARY KEY (component, version)
) ENGINE = InnoDB`

// QuoteIdent quotes a MySQL identifier (doubling any backquote).
func QuoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// Qualifier is the table name prefix of a schema: "`db`." or "" for the connection's database.
func Qualifier(schema string) string {
	if schema == "" {
		return ""
	}
	return QuoteIdent(schema) + "."
}

// Run applies the files of files not yet recorded for component in schema (a database,
// created when missing; "" for the connection's), replacing {{schema}} with its qualifier.
func Run(ctx context.Context, db *sql.DB, schema, component string, files fs.FS) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	prefix := Qualifier(schema)
	if schema != "" {
		if _, err := conn.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+QuoteIdent(schema)); err != nil {
			return err
		}
	}
	lock := "txmq_migrate/" + schema
	lock = lock[:min(len(lock), 64)] // MySQL's longest lock name; a cut name only serialises more
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", lock, lockWait).Scan(&got); err != nil {
		return err
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("another process held the migration lock %q for %d s; try again once it is done", lock, lockWait)
	}
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", lock) }()
	if _, err := conn.ExecContext(ctx, strings.ReplaceAll(sqlMigrationsTable, "{{s}}", prefix)); err != nil {
		return err
	}
	return sqlmigrate.Apply(ctx, conn, prefix+"txmq_migrations", component, files, func(text string) string {
		return strings.ReplaceAll(text, "{{schema}}", prefix)
	})
}
