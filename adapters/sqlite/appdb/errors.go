package appdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/txmq/txmq/core"
)

// The one place where SQLite's errors are sorted.

// sqliteCode returns the SQLite result code in err's chain (primary: its low byte; and the
// extended code), or false when err carries none.
func sqliteCode(err error) (primary, extended int, ok bool) {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return 0, 0, false
	}
	return se.Code() & 0xff, se.Code(), true
}

// busy reports whether err is SQLite's lock contention: another connection held the write
// lock past busy_timeout (SQLITE_BUSY), a table was locked (SQLITE_LOCKED), or a transaction
// that began by reading found its snapshot stale when it came to write (SQLITE_BUSY_SNAPSHOT).
// The store's own transactions run again after a short pause on such an error (withBusyRetry).
func busy(err error) bool {
	primary, _, ok := sqliteCode(err)
	return ok && (primary == sqlite3.SQLITE_BUSY || primary == sqlite3.SQLITE_LOCKED)
}

// unavailable reports whether err means the database file could not be used for a reason
// that should pass: lock contention past busy_timeout, a disk error or a full disk, a file
// that cannot be opened or written, no memory, an interrupted statement, a timeout, a broken
// or closed handle. A cancelled context, a constraint violation or an SQL error is not.
func unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, core.ErrBackendUnavailable) {
		return true
	}
	if primary, _, ok := sqliteCode(err); ok {
		switch primary {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_READONLY,
			sqlite3.SQLITE_INTERRUPT, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN,
			sqlite3.SQLITE_PROTOCOL:
			return true
		}
		return false
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone):
		return true
	}
	return strings.Contains(err.Error(), "sql: database is closed")
}

// classify wraps err with op (what the dialect was doing); an error meaning the file could
// not be used for now also wraps core.ErrBackendUnavailable and says what to check.
func classify(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case unavailable(err):
		return fmt.Errorf("sqlite appdb: %s: the app database file is locked, unreadable or full (check the file, its disk, and which process holds its write lock): %w: %w", op, core.ErrBackendUnavailable, err)
	}
	return fmt.Errorf("sqlite appdb: %s: %w", op, err)
}

// busyRetries is how many times a transaction of the store's own runs again after lock
// contention (busy), each after a pause doubling from busyPause; busy_timeout has already
// waited inside SQLite before each of them.
const (
	busyRetries = 3
	busyPause   = 5 * time.Millisecond
)

// withBusyRetry runs fn, and again (up to busyRetries times) while it fails with lock
// contention and ctx lasts. fn must be a whole transaction (it ran to a rollback).
func withBusyRetry(ctx context.Context, fn func() error) error {
	pause := busyPause
	for i := 0; ; i++ {
		err := fn()
		if err == nil || i == busyRetries || !busy(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause *= 2
	}
}
