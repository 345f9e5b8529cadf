package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/txmq/txmq/core"
)

// TestClassify: the one place that sorts errors: unavailability (a lock held past
// busy_timeout, a closed handle, timeouts), and the rest.
func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		err                    error
		unavailable, rejection bool
	}{
		{"busy (a lock held past busy_timeout)", outageErr(), true, false},
		{"syntax error", syntaxErr(t), false, false},
		{"bad conn", driver.ErrBadConn, true, false},
		{"conn done", sql.ErrConnDone, true, false},
		{"deadline", context.DeadlineExceeded, true, false},
		{"canceled", context.Canceled, false, false},
		{"db closed", errors.New("sql: database is closed"), true, false},
		{"plain", errors.New("boom"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := classify("op", tc.err)
			if errors.Is(got, core.ErrBackendUnavailable) != tc.unavailable || errors.Is(got, core.ErrRejected) != tc.rejection {
				t.Errorf("classify(%v) = %v; want unavailable %v, rejected %v", tc.err, got, tc.unavailable, tc.rejection)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("classify(%v) = %v; does not wrap the cause", tc.err, got)
			}
			if retryable(tc.err) {
				t.Errorf("retryable(%v) = true", tc.err)
			}
		})
	}
	if _, _, ok := code(outageErr()); !ok {
		t.Fatalf("the outage error %v carries no SQLite code", outageErr())
	}
}

// syntaxErr returns the driver's error for a malformed statement.
func syntaxErr(t *testing.T) error {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec("SELEC 1")
	if err == nil {
		t.Fatal("no error")
	}
	return fmt.Errorf("exec: %w", err)
}
