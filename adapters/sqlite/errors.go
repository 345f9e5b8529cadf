package sqlite

import (
	"fmt"

	"github.com/txmq/txmq/adapters/sqlite/internal/sqliteerr"
	"github.com/txmq/txmq/core"
)

// code returns the SQLite result code in err's chain (primary and extended), or false.
func code(err error) (primary, extended int, ok bool) { return sqliteerr.Code(err) }

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
func Unavailable(err error) bool { return sqliteerr.Unavailable(err) }

// rejected reports whether err is SQLite refusing a value permanently: a string or blob over
// SQLITE_MAX_LENGTH (SQLITE_TOOBIG). Running the same statement again cannot succeed.
func rejected(err error) bool { return sqliteerr.Rejected(err) }

// retryable reports whether a call that failed with err may be run again at once: a read
// transaction whose snapshot went stale (SQLITE_BUSY_SNAPSHOT). A plain SQLITE_BUSY already
// waited busy_timeout and is not run again: the node retries.
func retryable(err error) bool { return sqliteerr.BusySnapshot(err) }
