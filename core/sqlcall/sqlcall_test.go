package sqlcall

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

var (
	errRetry = errors.New("deadlock victim")
	errDown  = errors.New("connection refused")
	errOther = errors.New("syntax error")
)

func runner(closed *atomic.Bool) *Runner {
	return &Runner{
		Name: "test", Timeout: time.Second,
		Retryable:   func(err error) bool { return errors.Is(err, errRetry) },
		Unavailable: func(err error) bool { return errors.Is(err, errDown) },
		Classify: func(op string, err error) error {
			if err == nil {
				return nil
			}
			return fmt.Errorf("test: %s: %w", op, err)
		},
		Closed: closed,
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		errs       []error // returned by the tries in order
		tries      int     // Runner.Tries
		closed     bool
		wantTries  int
		wantErr    error
		wantClosed bool
	}{
		{"success", []error{nil}, 0, false, 1, nil, false},
		{"retryable then success", []error{errRetry, nil}, 0, false, 2, nil, false},
		{"retryable twice", []error{errRetry, errRetry}, 0, false, 2, errRetry, false},
		{"other error not retried", []error{errOther}, 0, false, 1, errOther, false},
		{"closed meanwhile", []error{errOther}, 0, true, 1, errOther, true},
		{"unavailable while closed is not ErrClosed", []error{errDown}, 0, true, 1, errDown, false},
		{"four tries: retryable thrice then success", []error{errRetry, errRetry, errRetry, nil}, 4, false, 4, nil, false},
		{"four tries: retryable each time", []error{errRetry, errRetry, errRetry, errRetry}, 4, false, 4, errRetry, false},
		{"four tries: other error stops", []error{errRetry, errOther}, 4, false, 2, errOther, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var closed atomic.Bool
			closed.Store(tc.closed)
			tries := 0
			r := runner(&closed)
			r.Tries = tc.tries
			err := r.Run(context.Background(), "op", func(ctx context.Context) error {
				if _, ok := ctx.Deadline(); !ok {
					t.Error("call without a deadline")
				}
				tries++
				return tc.errs[tries-1]
			})
			if tries != tc.wantTries || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) || errors.Is(err, core.ErrClosed) != tc.wantClosed {
				t.Fatalf("Run = %v after %d tries; want %v after %d, ErrClosed %v", err, tries, tc.wantErr, tc.wantTries, tc.wantClosed)
			}
		})
	}
}
