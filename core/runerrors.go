package core

import (
	"errors"
	"fmt"
	"time"
)

// ReasonPermanent: the listener returned an error marked permanent (PermanentError): the
// batch was dead-lettered on that run, whatever budget it had left.
const ReasonPermanent = "permanent"

// PermanentError marks a listener's error as one no retry can fix: the engine dead-letters
// the batch at once (reason ReasonPermanent) instead of retrying it. Err may be nil.
type PermanentError struct {
	// Err is the listener's error.
	Err error
}

// Error returns Err's text, or a generic text when Err is nil.
func (e *PermanentError) Error() string {
	if e.Err == nil {
		return "txmq: permanent failure"
	}
	return e.Err.Error()
}

// Unwrap returns Err, so that errors.Is and errors.As see through the mark.
func (e *PermanentError) Unwrap() error { return e.Err }

// RetryAfterError asks for the next run of a failed batch no earlier than Delay from the
// failure, instead of the queue's backoff. The run is spent as any failure.
type RetryAfterError struct {
	// Delay is the least time before the next run; a negative Delay is taken as 0.
	Delay time.Duration
	// Err is the listener's error.
	Err error
}

// Error returns Err's text with the delay, or a generic text when Err is nil.
func (e *RetryAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("txmq: retry after %v", e.Delay)
	}
	return e.Err.Error() + fmt.Sprintf(" (retry after %v)", e.Delay)
}

// Unwrap returns Err, so that errors.Is and errors.As see through the mark.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// IsPermanent reports whether err, or an error it wraps, is a PermanentError.
func IsPermanent(err error) bool {
	var p *PermanentError
	return err != nil && errors.As(err, &p)
}

// RetryDelay returns the delay of the outermost RetryAfterError in err's chain, and whether
// there is one.
func RetryDelay(err error) (time.Duration, bool) {
	var r *RetryAfterError
	if err == nil || !errors.As(err, &r) {
		return 0, false
	}
	return max(r.Delay, 0), true
}
