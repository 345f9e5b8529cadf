package txmq

import (
	"time"

	"github.com/txmq/txmq/core"
)

// PermanentError is the error Permanent returns; errors.As finds it in a listener's error.
type PermanentError = core.PermanentError

// RetryAfterError is the error RetryAfter returns; errors.As finds it in a listener's error.
type RetryAfterError = core.RetryAfterError

// Permanent marks err as one no retry can fix. A listener that returns it (or an error
// wrapping it) has its batch dead-lettered on that run, whatever budget is left: one dead
// letter with reason ReasonPermanent, the drop counted and logged, OnError called once with
// the returned error. errors.Is and errors.As see err through the mark. Permanent(nil)
// returns a non-nil error: the batch is still dropped.
func Permanent(err error) error { return &core.PermanentError{Err: err} }

// RetryAfter marks err as a failure whose next run comes no earlier than d from now, instead
// of after the queue's Backoff (d < 0 is taken as 0). The run is spent as any failure: past
// the budget the batch takes the terminal path as usual. errors.Is and errors.As see err
// through the mark. RetryAfter(d, nil) returns a non-nil error: the batch still fails.
func RetryAfter(d time.Duration, err error) error { return &core.RetryAfterError{Delay: d, Err: err} }
