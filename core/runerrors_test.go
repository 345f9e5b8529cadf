package core

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestRunErrorMarks(t *testing.T) {
	t.Parallel()
	base := errors.New("base")
	tests := []struct {
		name      string
		err       error
		permanent bool
		delay     time.Duration
		hasDelay  bool
		text      string
		wraps     bool // errors.Is(err, base)
	}{
		{name: "nil", err: nil},
		{name: "plain", err: base, text: "base", wraps: true},
		{name: "permanent", err: &PermanentError{Err: base}, permanent: true, text: "base", wraps: true},
		{name: "permanent nil", err: &PermanentError{}, permanent: true, text: "txmq: permanent failure"},
		{name: "wrapped permanent", err: fmt.Errorf("run: %w", &PermanentError{Err: base}), permanent: true, text: "run: base", wraps: true},
		{name: "retry after", err: &RetryAfterError{Delay: time.Second, Err: base}, delay: time.Second, hasDelay: true, text: "base (retry after 1s)", wraps: true},
		{name: "retry after negative", err: &RetryAfterError{Delay: -time.Second}, hasDelay: true, text: "txmq: retry after -1s"},
		{name: "both", err: &PermanentError{Err: &RetryAfterError{Delay: time.Minute, Err: base}}, permanent: true, delay: time.Minute, hasDelay: true, text: "base (retry after 1m0s)", wraps: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := IsPermanent(tc.err); got != tc.permanent {
				t.Errorf("IsPermanent = %v, want %v", got, tc.permanent)
			}
			d, ok := RetryDelay(tc.err)
			if d != tc.delay || ok != tc.hasDelay {
				t.Errorf("RetryDelay = %v, %v; want %v, %v", d, ok, tc.delay, tc.hasDelay)
			}
			if tc.err != nil && tc.err.Error() != tc.text {
				t.Errorf("Error() = %q, want %q", tc.err.Error(), tc.text)
			}
			if got := errors.Is(tc.err, base); got != tc.wraps {
				t.Errorf("errors.Is(err, base) = %v, want %v: the mark must not hide the wrapped error", got, tc.wraps)
			}
		})
	}
}
