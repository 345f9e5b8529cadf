package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// listenerCtx is a listener's context: a cancel context carrying the claim's *running under
// leaseKey{}. The cancel context (context.WithCancelCause, two allocations and a lock round
// trip at its end) is made only when something needs it: the first Done, or a Value lookup
// other than leaseKey{} (which is how context.Cause and the contexts derived from this one
// find it). A listener that never looks at its context, common at one message per batch,
// costs none of that; a cancel that comes first is kept and applied when the context is
// made, so Err, Done and Cause read the same as a plain cancel context's, from this context
// and from any derived from it.
type listenerCtx struct {
	r      *running
	parent context.Context

	made  atomic.Bool // inner and cancelInner are set (written under mu, then read freely)
	inner context.Context
	// cancelInner cancels inner.
	cancelInner context.CancelCauseFunc

	mu    sync.Mutex
	ended bool  // cancelled before inner was made
	why   error // the cause given then
}

// init sets c up for r, under parent (context.Background() for a claim).
func (c *listenerCtx) init(parent context.Context, r *running) {
	c.parent, c.r = parent, r
}

// ctx returns the cancel context, making it (cancelled if c was) the first time.
func (c *listenerCtx) ctx() context.Context {
	if c.made.Load() {
		return c.inner
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.made.Load() {
		c.inner, c.cancelInner = context.WithCancelCause(c.parent)
		if c.ended {
			c.cancelInner(c.why)
		}
		c.made.Store(true)
	}
	return c.inner
}

// Deadline returns the parent's deadline.
func (c *listenerCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

// Done returns the channel closed when the listener's context is cancelled.
func (c *listenerCtx) Done() <-chan struct{} { return c.ctx().Done() }

// Err returns context.Canceled once the context was cancelled (or the parent's error).
func (c *listenerCtx) Err() error {
	if c.made.Load() {
		return c.inner.Err()
	}
	c.mu.Lock()
	ended := c.ended
	c.mu.Unlock()
	if ended {
		return context.Canceled
	}
	if c.made.Load() { // made meanwhile
		return c.inner.Err()
	}
	return c.parent.Err()
}

// Value returns the claim's *running for leaseKey{}, else the cancel context's value.
func (c *listenerCtx) Value(key any) any {
	if _, ok := key.(leaseKey); ok {
		return c.r
	}
	return c.ctx().Value(key)
}

// String names the context, as the context package's own do.
func (c *listenerCtx) String() string { return "txmq listener context" }

// cancel cancels the context with cause (nil: context.Canceled); the first cause wins.
func (c *listenerCtx) cancel(cause error) {
	if c.made.Load() {
		c.cancelInner(cause)
		return
	}
	c.mu.Lock()
	if !c.made.Load() {
		if !c.ended {
			c.ended, c.why = true, cause
		}
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.cancelInner(cause)
}

// cause is context.Cause of the context, without making the cancel context.
func (c *listenerCtx) cause() error {
	if c.made.Load() {
		return context.Cause(c.inner)
	}
	c.mu.Lock()
	ended, why := c.ended, c.why
	c.mu.Unlock()
	switch {
	case !ended && c.made.Load():
		return context.Cause(c.inner)
	case !ended:
		return context.Cause(c.parent)
	case why == nil:
		return context.Canceled
	}
	return why
}

// cancel cancels r's listener context with cause (nil: context.Canceled); the first cause wins.
func (r *running) cancel(cause error) { r.ctx.cancel(cause) }
