// Package sqliteerr sorts modernc.org/sqlite's errors, once for the module: the jobs backend
// (package sqlite) and the app database (package appdb) both classify with it.
package sqliteerr

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/txmq/txmq/core"
)

// Code returns the SQLite result code in err's chain (the primary code: its low byte) and the
// extended code, or false when err carries none.
func Code(err error) (primary, extended int, ok bool) {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return 0, 0, false
	}
	return se.Code() & 0xff, se.Code(), true
}

// Unavailable reports whether err means the database file could not be used for a reason
// that should pass: another connection held the write lock past busy_timeout (SQLITE_BUSY,
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
	if primary, _, ok := Code(err); ok {
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

// Busy reports whether err is lock contention: another connection held the write lock past
// busy_timeout (SQLITE_BUSY), a table was locked (SQLITE_LOCKED), or a transaction that began
// by reading found its snapshot stale when it came to write (SQLITE_BUSY_SNAPSHOT).
func Busy(err error) bool {
	primary, _, ok := Code(err)
	return ok && (primary == sqlite3.SQLITE_BUSY || primary == sqlite3.SQLITE_LOCKED)
}

// BusySnapshot reports whether err is SQLITE_BUSY_SNAPSHOT: a read transaction's snapshot
// went stale; running the whole call again at once may succeed.
func BusySnapshot(err error) bool {
	_, extended, ok := Code(err)
	return ok && extended == sqlite3.SQLITE_BUSY_SNAPSHOT
}

// Rejected reports whether err is SQLite refusing a value permanently: a string or blob over
// SQLITE_MAX_LENGTH (SQLITE_TOOBIG). Running the same statement again cannot succeed.
func Rejected(err error) bool {
	primary, _, ok := Code(err)
	return ok && primary == sqlite3.SQLITE_TOOBIG
}
