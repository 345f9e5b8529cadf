package mysql

import (
	"errors"
	"fmt"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/txmq/txmq/adapters/mysql/internal/myerr"
	"github.com/txmq/txmq/core"
)

// Server error numbers the Backend sorts as refusals of a value (see the MySQL and MariaDB
// error references; the others are sorted in internal/myerr).
const (
	erNetPacketTooLong = 1153 // a packet over max_allowed_packet (the server ends the connection)
	erTruncatedWrong   = 1292 // an incorrect value (strict mode)
	erWarnDataOutRange = 1264 // out of range value (strict mode)
	erTooBigRowsize    = 1118
	erStringValue      = 1366 // an incorrect string value (strict mode)
	erDataTooLong      = 1406 // data too long for a column (strict mode)
)

// classify is the one place where database errors are sorted: an error meaning the database
// could not be reached or refused work for a reason that should pass is wrapped in
// core.ErrBackendUnavailable; a value the database refuses permanently in core.ErrRejected;
// any other error is returned wrapped with its context only. op names the call and its queue.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if rejected(err) {
		return fmt.Errorf("mysql: %s: the database refused the batch permanently (a value it cannot store); it is not retried: %w: %w", op, core.ErrRejected, err)
	}
	if Unavailable(err) {
		return fmt.Errorf("mysql: %s: the database is unreachable or refusing work (it is retried; check the database and the DSN's connection settings): %w: %w", op, core.ErrBackendUnavailable, err)
	}
	return fmt.Errorf("mysql: %s: %w", op, err)
}

// Unavailable reports whether err means the database could not be reached or refused work
// for a reason that should pass: a refused, reset or closed connection, a closed *sql.DB, a
// timeout, or a server error meaning the same (too many connections, shutdown, network
// errors, a killed connection or statement, a lock wait timeout, a read-only server). A
// cancelled context, a constraint violation or an SQL error is not. (The module's packages
// share it: internal/myerr.)
func Unavailable(err error) bool { return myerr.Unavailable(err) }

// rejected reports whether err is the database refusing a value permanently: a packet over
// max_allowed_packet (either side), or a value strict mode refuses (too long, out of range,
// an invalid string). Running the same statement again cannot succeed.
func rejected(err error) bool {
	if errors.Is(err, gomysql.ErrPktTooLarge) {
		return true
	}
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case erNetPacketTooLong, erDataTooLong, erStringValue, erWarnDataOutRange, erTruncatedWrong, erTooBigRowsize:
			return true
		}
	}
	return false
}

// deadlockTries is how many times a statement or transaction runs while InnoDB picks it as a
// deadlock victim (or its lock wait times out). Grouped acks of ordered batches lock key rows
// and job rows by primary key while claims lock job rows through the (queue, run_at) index:
// under load, with many keys, InnoDB's deadlock detector rolls one of them back now and then,
// and a single retry at once met the same transactions again (an ack lost to two deadlocks in
// a row returned its batch only after the lease: parity ordering/thousand_keys_interleaved_dup
// under CI load). Five tries with short jittered pauses, all within QueryTimeout.
const deadlockTries = 5

// retryable reports whether a transaction that failed with err may be run again at once: the
// server chose it as a deadlock victim or its lock wait timed out (both roll it back).
func retryable(err error) bool { return myerr.Retryable(err) }
