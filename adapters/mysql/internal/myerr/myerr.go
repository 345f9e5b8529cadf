// Package myerr sorts the errors of MySQL and MariaDB (github.com/go-sql-driver/mysql) for the
// module's packages (the jobs backend of package mysql, the outbox's control tables of
// package appdb): which mean the database is unreachable or refusing work for a while, and
// which roll a transaction back so that it may run again at once.
package myerr

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/txmq/txmq/core"
)

// Server error numbers sorted here (see the MySQL and MariaDB error references).
const (
	erConCount         = 1040 // too many connections
	erServerShutdown   = 1053 // server shutdown in progress
	erNetReadError     = 1158
	erNetWriteError    = 1161 // 1158-1161: network errors reading or writing the connection
	erLockWaitTimeout  = 1205
	erLockDeadlock     = 1213
	erQueryInterrupted = 1317
	erConnKilled       = 1927 // MariaDB: connection killed
	erStatementTimeout = 1969 // MariaDB: max_statement_time exceeded
	erMySQLTimeout     = 3024 // MySQL: max_execution_time exceeded
	erReadOnly         = 1290 // --read-only: a replica or a failover in progress
)

// Unavailable reports whether err means the database could not be reached or refused work
// for a reason that should pass: a refused, reset or closed connection, a closed *sql.DB, a
// timeout, or a server error meaning the same (too many connections, shutdown, network
// errors, a killed connection or statement, a lock wait timeout, a read-only server). A
// cancelled context, a constraint violation or an SQL error is not.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, core.ErrBackendUnavailable) {
		return true
	}
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) {
		switch n := myErr.Number; {
		case n == erConCount, n == erServerShutdown, n >= erNetReadError && n <= erNetWriteError,
			n == erLockWaitTimeout, n == erQueryInterrupted, n == erConnKilled,
			n == erStatementTimeout, n == erMySQLTimeout, n == erReadOnly:
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
	if errors.Is(err, gomysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	if strings.Contains(err.Error(), "sql: database is closed") {
		return true // database/sql's unexported errDBClosed
	}
	return core.ConnectionLost(err) // dial, read and write failures of the connection itself
}

// Retryable reports whether a transaction that failed with err may be run again at once: the
// server chose it as a deadlock victim or its lock wait timed out (both roll it back).
func Retryable(err error) bool {
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) {
		return myErr.Number == erLockDeadlock || myErr.Number == erLockWaitTimeout
	}
	return false
}
