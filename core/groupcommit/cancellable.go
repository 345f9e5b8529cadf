package groupcommit

import (
	"context"
	"fmt"
)

// Caller is a request that carries its caller's context and can take an outcome of its own
// (see RunCancellable).
type Caller interface {
	// CallerContext is the context of the call that made the request.
	CallerContext() context.Context
	// SetErr records the request's own outcome.
	SetErr(err error)
}

// RunCancellable runs a round whose statement may not outlive any member's caller: a round
// of publishes, say, where a batch must not be stored behind the back of a caller told that
// its publish failed. Members whose caller gave up while the round gathered are left out
// (each told its caller's error through SetErr); exec runs the rest, on a context cancelled
// as soon as any of their callers gives up, and a failure it returns then carries that
// caller's reason (context.Cause), which becomes every member's: the statement was cut short.
func RunCancellable[R Caller](ctx context.Context, reqs []R, exec func(context.Context, []R) error) error {
	live := reqs[:0:0]
	for _, r := range reqs {
		if c := r.CallerContext(); c != nil && c.Err() != nil {
			r.SetErr(c.Err())
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stops := make([]func() bool, 0, len(live))
	for _, r := range live {
		if c := r.CallerContext(); c != nil {
			stops = append(stops, context.AfterFunc(c, func() { cancel(context.Cause(c)) }))
		}
	}
	err := exec(ctx, live)
	for _, stop := range stops {
		stop()
	}
	if cause := context.Cause(ctx); err != nil && cause != nil {
		return fmt.Errorf("%w (the statement was cut short: a caller of its round gave up: %w)", err, cause)
	}
	return err
}
