package sqljobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/txmq/txmq/core"
)

// classify is the one place where database errors are sorted: an error meaning the database
// could not be reached or refused work for a reason that should pass is wrapped in
// core.ErrBackendUnavailable; any other error is returned wrapped with its context only.
// op names the call and its queue ("fetch", "ack batch X of queue \"q\"").
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if rejected(err) {
		return fmt.Errorf("sqljobs: %s: the database refused the batch permanently (a value it cannot store); it is not retried: %w: %w", op, core.ErrRejected, err)
	}
	if Unavailable(err) {
		return fmt.Errorf("sqljobs: %s: the database is unreachable or refusing work (it is retried; check the database and the pool's connection settings): %w: %w", op, core.ErrBackendUnavailable, err)
	}
	return fmt.Errorf("sqljobs: %s: %w", op, err)
}

// Unavailable reports whether err means the database could not be reached or refused work
// for a reason that should pass: a refused, reset or closed connection, a closed pool, a
// timeout, or a server error of class 08 (connection exception), 57P (operator intervention:
// admin shutdown, crash shutdown, cannot connect now) or 53300 (too many connections). A
// cancelled context, a constraint violation or an SQL error is not.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, core.ErrBackendUnavailable) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		code := pgErr.Code
		return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "57P") || code == "53300"
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return true
	}
	if errors.Is(err, context.Canceled) {
		return false // the caller gave up; nothing is wrong with the database
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	if errors.Is(err, puddle.ErrClosedPool) || errors.Is(err, pgconn.ErrConnClosed) {
		return true
	}
	return core.ConnectionLost(err) // dial, read and write failures of the connection itself
}

// rejected reports whether err is the database refusing a value permanently: a data exception
// (class 22: invalid byte sequence, value too long, out of range) or a program limit (class
// 54: a value or statement over a size limit). Running the same statement again cannot succeed.
func rejected(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "54")
	}
	return false
}

// retryable reports whether a statement that failed with err may be run again at once on
// another connection: nothing reached the server (a pooled connection that had died while
// idle), or the server aborted it as a deadlock or serialization victim.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40P01" || pgErr.Code == "40001"
	}
	return pgconn.SafeToRetry(err)
}
