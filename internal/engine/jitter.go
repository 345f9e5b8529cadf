package engine

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/txmq/txmq/core"
)

// jitter spreads d by ±20%.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	span := int64(d) / 5
	if span == 0 {
		return d
	}
	return d - time.Duration(span) + time.Duration(rand.Int64N(2*span+1))
}

// Backoff returns a backoff that waits base after the first failed run, doubling per run up
// to limit, with ±20% jitter (txmq.ExponentialBackoff).
func Backoff(base, limit time.Duration) func(run int) time.Duration {
	return func(run int) time.Duration {
		if run < 1 {
			run = 1
		}
		d := base
		for i := 1; i < run && d < limit; i++ {
			d *= 2
		}
		if d > limit {
			d = limit
		}
		return jitter(d)
	}
}

// defaultBackoff is txmq.DefaultBackoff: 1 s doubling per run, at most 10 min.
var defaultBackoff = Backoff(time.Second, 10*time.Minute)

// backoff returns the retry delay after run: the queue's Backoff, else the node's; a
// panicking Backoff falls back to DefaultBackoff.
func (rn *runner) backoff(spec *Spec, run int) (d time.Duration) {
	n := rn.e
	fn, what := n.opts.Backoff, "NodeOptions.Backoff"
	if spec.Backoff != nil {
		fn, what = spec.Backoff, "QueueConfig.Backoff of queue "+strconv.Quote(spec.Name)
	}
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("txmq: "+what+" panicked; using DefaultBackoff (fix the Backoff func)", "panic", r)
			d = defaultBackoff(run)
		}
	}()
	return max(fn(run), 0)
}

// classify returns the error the policy acts on for a failed run: the queue's ClassifyError
// of runErr, or runErr itself when the listener already decided the outcome (Results, Snooze,
// Discard), when ClassifyError returns nil, or when it panics (logged).
func (rn *runner) classify(spec *Spec, d *Batch, runErr error, run int) (out error) {
	if core.ResultsOf(runErr, d.Count) != nil {
		return runErr
	}
	defer func() {
		if r := recover(); r != nil {
			rn.e.log.Error("txmq: QueueConfig.ClassifyError panicked; the listener's error is kept (fix the func)", "queue", spec.Name, "panic", r)
			out = runErr
		}
	}()
	if c := spec.ClassifyError(runErr, run); c != nil {
		return c
	}
	return runErr
}
