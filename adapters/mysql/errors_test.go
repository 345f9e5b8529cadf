package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/txmq/txmq/core"
)

// TestClassify: the one place that sorts errors: unavailability, permanent refusals, and
// the rest.
func TestClassify(t *testing.T) {
	t.Parallel()
	myErr := func(n uint16) error { return fmt.Errorf("exec: %w", &gomysql.MySQLError{Number: n, Message: "x"}) }
	for _, tc := range []struct {
		name                   string
		err                    error
		unavailable, rejection bool
		retry                  bool
	}{
		{"too many connections", myErr(1040), true, false, false},
		{"server shutdown", myErr(1053), true, false, false},
		{"network read error", myErr(1159), true, false, false},
		{"lock wait timeout", myErr(1205), true, false, true},
		{"deadlock", myErr(1213), false, false, true},
		{"connection killed", myErr(1927), true, false, false},
		{"read only", myErr(1290), true, false, false},
		{"packet too large", myErr(1153), false, true, false},
		{"data too long", myErr(1406), false, true, false},
		{"incorrect string", myErr(1366), false, true, false},
		{"client packet too large", gomysql.ErrPktTooLarge, false, true, false},
		{"syntax error", myErr(1064), false, false, false},
		{"duplicate key", myErr(1062), false, false, false},
		{"invalid connection", gomysql.ErrInvalidConn, true, false, false},
		{"bad conn", driver.ErrBadConn, true, false, false},
		{"conn done", sql.ErrConnDone, true, false, false},
		{"deadline", context.DeadlineExceeded, true, false, false},
		{"canceled", context.Canceled, false, false, false},
		{"dial", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true, false, false},
		{"db closed", errors.New("sql: database is closed"), true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := classify("op", tc.err)
			if errors.Is(got, core.ErrBackendUnavailable) != tc.unavailable || errors.Is(got, core.ErrRejected) != tc.rejection {
				t.Errorf("classify(%v) = %v; want unavailable %v, rejected %v", tc.err, got, tc.unavailable, tc.rejection)
			}
			if retryable(tc.err) != tc.retry {
				t.Errorf("retryable(%v) = %v; want %v", tc.err, !tc.retry, tc.retry)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("classify(%v) = %v; does not wrap the cause", tc.err, got)
			}
		})
	}
}
