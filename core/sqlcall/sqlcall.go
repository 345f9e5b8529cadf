// Package sqlcall runs the database calls of the SQL jobs adapters (sqljobs on PostgreSQL,
// mysql on MySQL/MariaDB) the same way: each bounded by a timeout on top of the caller's
// context, run again when a failure is retryable (a deadlock victim, a connection that died
// while idle; once more at once by default, Runner.Tries), and its error classified by the adapter, noting a Close
// that happened meanwhile.
package sqlcall

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core"
)

// Runner runs calls. Set every field before the first call.
type Runner struct {
	// Name prefixes errors ("sqljobs", "mysql").
	Name string
	// Timeout bounds each call (both tries).
	Timeout time.Duration
	// Retryable reports whether a failed call may run again at once.
	Retryable func(error) bool
	// Tries is how many times a call runs at most while its failures are retryable: the
	// first retry at once, each later one after a pause of up to a few milliseconds (a
	// deadlock victim retried at once can meet the same transactions again). Default 2.
	Tries int
	// Classify names op in err and wraps core's sentinels (the adapter's one place for it).
	Classify func(op string, err error) error
	// Unavailable reports whether err means the database is unreachable.
	Unavailable func(error) bool
	// Closed is set when the adapter closes.
	Closed *atomic.Bool
}

// Run runs fn (Attempt) and classifies its error (Explain).
func (r *Runner) Run(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	return r.Explain(op, r.Attempt(ctx, fn))
}

// Attempt runs fn with Timeout on top of ctx, again while its failures are retryable (at most
// Tries runs, all within Timeout), and returns its error as it is.
func (r *Runner) Attempt(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	tries := r.Tries
	if tries <= 0 {
		tries = 2
	}
	err := fn(ctx)
	for try := 1; try < tries && err != nil && ctx.Err() == nil && r.Retryable(err); try++ {
		if try > 1 {
			t := time.NewTimer(time.Duration(rand.Int64N(int64(try) * int64(2*time.Millisecond))))
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
		err = fn(ctx)
	}
	return err
}

// Explain names op in err and classifies it, noting a Close that happened meanwhile (an error
// wrapping core.ErrClosed as well).
func (r *Runner) Explain(op string, err error) error {
	if err != nil && r.Closed.Load() && !r.Unavailable(err) && !errors.Is(err, core.ErrClosed) {
		return fmt.Errorf("%s: %s: the backend was closed: %w: %w", r.Name, op, core.ErrClosed, err)
	}
	return r.Classify(op, err)
}
