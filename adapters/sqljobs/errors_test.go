package sqljobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/txmq/txmq/core"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "server says " + code} }
	for _, tc := range []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"unexpected EOF", fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF), true},
		{"closed pool", puddle.ErrClosedPool, true},
		{"closed conn", fmt.Errorf("x: %w", pgconn.ErrConnClosed), true},
		{"deadline", context.DeadlineExceeded, true},
		{"admin shutdown 57P01", pg("57P01"), true},
		{"cannot connect now 57P03", pg("57P03"), true},
		{"connection failure 08006", pg("08006"), true},
		{"connection does not exist 08003", pg("08003"), true},
		{"too many connections 53300", pg("53300"), true},
		{"unique violation", pg("23505"), false},
		{"syntax error", pg("42601"), false},
		{"undefined table", pg("42P01"), false},
		{"disk full is not 53300", pg("53100"), false},
		{"cancelled by caller", context.Canceled, false},
		{"plain error", errors.New("boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unavailable(tc.err); got != tc.unavailable {
				t.Fatalf("Unavailable(%v) = %v, want %v", tc.err, got, tc.unavailable)
			}
			wrapped := classify("fetch", tc.err)
			if errors.Is(wrapped, core.ErrBackendUnavailable) != tc.unavailable {
				t.Fatalf("classify(%v) = %v", tc.err, wrapped)
			}
			if !errors.Is(wrapped, tc.err) {
				t.Fatalf("classify must keep the cause: %v", wrapped)
			}
		})
	}
	for _, tc := range []struct {
		err      error
		rejected bool
	}{
		{pg("22021"), true}, // invalid byte sequence
		{pg("22001"), true}, // value too long
		{pg("54000"), true}, // program limit exceeded
		{pg("23505"), false},
		{pg("53100"), false},
		{pg("08006"), false},
		{errors.New("boom"), false},
	} {
		wrapped := classify("publish", tc.err)
		if errors.Is(wrapped, core.ErrRejected) != tc.rejected || (tc.rejected && errors.Is(wrapped, core.ErrBackendUnavailable)) {
			t.Errorf("classify(%v) = %v; want rejected %v", tc.err, wrapped, tc.rejected)
		}
	}
	if classify("x", nil) != nil {
		t.Fatal("classify(nil) != nil")
	}
}
