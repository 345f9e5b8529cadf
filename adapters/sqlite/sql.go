package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"
)

// heldAt is the run_at of a row held behind the first row of its ordering key: never due.
const heldAt = math.MaxInt64

// Every statement names its arguments (:now, :queue, ...; sql.Named), so one value may appear
// several times. :now is the machine's clock in microseconds since the Unix epoch, taken once
// per statement or transaction: every process on a SQLite file runs on the machine that holds
// the file, so they share this clock (SQLite's own 'now' has millisecond precision only).

// nowArg is the :now argument of a statement run now.
func nowArg() sql.NamedArg { return sql.Named("now", time.Now().UnixMicro()) }

// list returns n named placeholders :<prefix>0, :<prefix>1, ..., for an IN list or VALUES.
func list(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, ":%s%d", prefix, i)
	}
	return b.String()
}

// listArgs returns the arguments of list(prefix, len(vals)).
func listArgs[T any](prefix string, vals []T) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		out[i] = sql.Named(fmt.Sprintf("%s%d", prefix, i), v)
	}
	return out
}

// withList replaces {{in}} in stmt by list(prefix, n).
func withList(stmt, prefix string, n int) string {
	return strings.Replace(stmt, "{{in}}", list(prefix, n), 1)
}

// newToken returns a random positive lease token: one per claim transaction, so a settle from
// an earlier holder of a row never matches it again (the row's id and the token together
// name one hand-out).
func newToken() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]) >> 1)
}

// execer is what a statement runs on: the database or a transaction's connection.
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

// lockWrites takes this Backend's write turn: SQLite has one writer per file, so the writers
// of every Backend of this process on the file queue here (a Go channel shared by them,
// writeturn.go: first come, first served, woken at once) and then, with the other
// processes' Backends, at the lock file beside the database (fileLock, woken at once too),
// instead of in SQLite's busy handler (which sleeps and polls). The returned func gives the
// turn back. When ctx ends while the lock file is awaited, the turn is given back only once
// that wait ended (and the lock was let go), so no two writers of this Backend ever share
// the lock file's lock.
func (be *Backend) lockWrites(ctx context.Context) (func(), error) {
	select {
	case be.writes <- struct{}{}:
	case <-ctx.Done():
		return func() {}, ctx.Err()
	}
	if be.flock == nil {
		return func() { <-be.writes }, nil
	}
	locked := make(chan error, 1)
	go func() { locked <- be.flock.lock() }()
	select {
	case err := <-locked:
		if err != nil {
			<-be.writes
			return func() {}, fmt.Errorf("locking the writers' lock file beside the database: %w", err)
		}
		return func() { be.flock.unlock(); <-be.writes }, nil
	case <-ctx.Done():
		go func() {
			if <-locked == nil {
				be.flock.unlock()
			}
			<-be.writes
		}()
		return func() {}, ctx.Err()
	}
}

// exec runs one writing statement in its own (autocommit) transaction, in this Backend's
// write turn.
func (be *Backend) exec(ctx context.Context, stmt string, args ...any) (int64, error) {
	unlock, err := be.lockWrites(ctx)
	defer unlock()
	if err != nil {
		return 0, err
	}
	return affected(ctx, be.db, stmt, args...)
}

// inTx runs fn in a BEGIN IMMEDIATE transaction on one connection, in this Backend's write
// turn: the transaction takes the file's write lock when it begins (waiting up to
// busy_timeout for another process), so it never fails half-way for a lock, and every claim,
// settle and keyed publish of every process on the file is serialised. It commits when fn
// returns nil and rolls back otherwise; a connection whose rollback failed is discarded, so
// no transaction is ever left open in the pool.
func (be *Backend) inTx(ctx context.Context, fn func(tx execer) error) error {
	unlock, err := be.lockWrites(ctx)
	defer unlock()
	if err != nil {
		return err
	}
	conn, err := be.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if err := fn(conn); err != nil {
		rollback(ctx, conn)
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		rollback(ctx, conn)
		return err
	}
	return nil
}

// rollback ends conn's transaction, detached from ctx's cancellation; when that fails (the
// connection is broken, or SQLite already rolled back on its own), the connection is
// discarded rather than returned to the pool in an unknown state.
func rollback(ctx context.Context, conn *sql.Conn) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(rctx, "ROLLBACK"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
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

// micros converts a duration to whole microseconds for the SQL's arithmetic.
func micros(d time.Duration) int64 { return d.Microseconds() }
