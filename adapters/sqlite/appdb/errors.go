package appdb

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq/adapters/sqlite/internal/sqliteerr"
	"github.com/txmq/txmq/core"
)

// SQLite's errors are sorted in package sqliteerr, once for the module (the jobs backend uses
// it too); this file says what they mean for the app database.

// busy reports lock contention (sqliteerr.Busy): the store's own transactions run again
// after a short pause on such an error (withBusyRetry).
func busy(err error) bool { return sqliteerr.Busy(err) }

// unavailable reports whether err means the file could not be used for a reason that should
// pass (sqliteerr.Unavailable).
func unavailable(err error) bool { return sqliteerr.Unavailable(err) }

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
