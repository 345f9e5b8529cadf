package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"math"
	"strings"

	migrations "github.com/txmq/txmq/adapters/mysql/internal/migrate"
)

// sqlNow is the database's clock in microseconds since the Unix epoch (UTC, constant within a
// statement). Every time the Backend stores or compares is on it.
const sqlNow = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`

// heldAt is the run_at of a row held behind the first row of its ordering key: never due.
const heldAt = math.MaxInt64

// render substitutes the schema qualifier ({{s}}: "`db`." or "" for the connection's
// database) and the clock ({{now}}) into a statement.
func render(schema, stmt string) string {
	return strings.NewReplacer("{{s}}", qualifier(schema), "{{now}}", sqlNow).Replace(stmt)
}

// qualifier is the table name prefix of a schema: "`db`." or "".
func qualifier(schema string) string { return migrations.Qualifier(schema) }

// quoteIdent quotes a MySQL identifier (Options.Schema is checked against schemaPattern,
// so it holds no backquote; doubling one is the rule anyway).
func quoteIdent(s string) string { return migrations.QuoteIdent(s) }

// marks returns n comma-separated placeholders, for an IN list.
func marks(n int) string {
	if n <= 0 {
		return "NULL"
	}
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// withMarks replaces {{in}} in stmt by n placeholders.
func withMarks(stmt string, n int) string { return strings.Replace(stmt, "{{in}}", marks(n), 1) }

// withIDTable replaces {{in}} in stmt by a derived table of n ids: (SELECT ? AS id UNION ALL
// SELECT ? ...).
func withIDTable(stmt string, n int) string {
	return strings.Replace(stmt, "{{in}}", "(SELECT CAST(? AS SIGNED) AS id"+strings.Repeat(" UNION ALL SELECT ?", n-1)+")", 1)
}

// int64Args turns ids into statement arguments.
func int64Args(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// newToken returns a random positive lease token: one per claim transaction, so a settle from
// an earlier holder of a row never matches it again (the row's id and the token together
// name one hand-out).
func newToken() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]) >> 1)
}

// execer is what a statement runs on: the database or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// affected runs stmt and returns how many rows it changed.
func affected(ctx context.Context, q execer, stmt string, args ...any) (int64, error) {
	res, err := q.ExecContext(ctx, stmt, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// readCommitted is the isolation of the transactions that lock rows found by a range scan
// (claims, keyed publishes and acks, cancels, the reaper): READ COMMITTED locks the rows
// found, not the gaps between index entries, which REPEATABLE READ's next-key locks would
// (concurrent claims, whose lease updates move index entries into the gaps other claimers'
// scans locked, deadlock). Transactions that lock rows by primary key only take the session's
// isolation (nil), which saves the round trip of SET TRANSACTION.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// isolation is readCommitted when rc, else the session's (nil).
func isolation(rc bool) *sql.TxOptions {
	if rc {
		return readCommitted
	}
	return nil
}

// inTx runs fn in a transaction on db with opts (readCommitted or nil), committed when fn
// returns nil and rolled back otherwise.
func inTx(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// eachRow scans every row of rows with scan and calls fn after each, closing rows.
func eachRow(rows *sql.Rows, err error, dest []any, fn func() error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if err := fn(); err != nil {
			return err
		}
	}
	return rows.Err()
}
