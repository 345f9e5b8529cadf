package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/txmq/txmq/core"
)

// code returns the SQLite result code in err's chain (the primary code: its low byte) and the
// extended code, or false when err carries none.
func code(err error) (primary, extended int, ok bool) {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return 0, 0, false
	}
	return se.Code() & 0xff, se.Code(), true
}

// classify is the one place where database errors are sorted: an error meaning the database
// file could not be reached or refused work for a reason that should pass is wrapped in
// core.ErrBackendUnavailable; a value SQLite refuses permanently in core.ErrRejected; any
// other error is returned wrapped with its context only. op names the call and its queue.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if rejected(err) {
		return fmt.Errorf("sqlite: %s: the database refused the batch permanently (a value it cannot store); it is not retried: %w: %w", op, core.ErrRejected, err)
	}
	if Unavailable(err) {
		return fmt.Errorf("sqlite: %s: the database file is locked, unreadable or full (it is retried; check the file, its disk, and which process holds its write lock): %w: %w", op, core.ErrBackendUnavailable, err)
	}
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

// Unavailable reports whether err means the database file could not be used for a reason
// that should pass: another process held the write lock past busy_timeout (SQLITE_BUSY,
// SQLITE_LOCKED), the disk failed or is full (SQLITE_IOERR, SQLITE_FULL), the file cannot be
// opened or written (SQLITE_CANTOPEN, SQLITE_READONLY), memory ran out, a statement was
// interrupted by the call's timeout, a closed handle or a timeout. A cancelled context, a
// constraint violation or an SQL error is not.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, core.ErrBackendUnavailable) {
		return true
	}
	if primary, _, ok := code(err); ok {
		switch primary {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_READONLY,
			sqlite3.SQLITE_INTERRUPT, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN,
			sqlite3.SQLITE_PROTOCOL:
			return true
		}
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if errors.Is(err, context.Canceled) {
		return false // the caller gave up; nothing is wrong with the database
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	return strings.Contains(err.Error(), "sql: database is closed") // database/sql's unexported errDBClosed
}

// rejected reports whether err is SQLite refusing a value permanently: a string or blob over
// SQLITE_MAX_LENGTH (SQLITE_TOOBIG). Running the same statement again cannot succeed.
func rejected(err error) bool {
	primary, _, ok := code(err)
	return ok && primary == sqlite3.SQLITE_TOOBIG
}

// retryable reports whether a call that failed with err may be run again at once: a read
// transaction whose snapshot went stale (SQLITE_BUSY_SNAPSHOT). A plain SQLITE_BUSY already
// waited busy_timeout and is not run again: the node retries.
func retryable(err error) bool {
	_, extended, ok := code(err)
	return ok && extended == sqlite3.SQLITE_BUSY_SNAPSHOT
}
