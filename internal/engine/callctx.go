package engine

import (
	"context"
	"sync"
	"time"
)

// callCtx is the context of one backend call (a settle, a batch write, a fetch): a deadline
// and a cancel, like context.WithDeadline, but its timer is armed only once someone waits for
// it (Done or AfterFunc). A call that returns without waiting (the memory backend, most
// settles) then costs no timer: at one message per batch the timers of these contexts were a
// third of the bytes a node allocated. Err reads the clock, so it reports DeadlineExceeded
// once the deadline passed whether or not the timer was armed. Values come from the parent,
// which never ends (newCallCtx checks).
type callCtx struct {
	parent   context.Context
	deadline time.Time

	mu    sync.Mutex
	done  chan struct{} // made by the first Done or AfterFunc; closed when err is set
	err   error
	timer *time.Timer
	funcs map[*afterFunc]struct{} // registered by AfterFunc, run once err is set

	prev, next *callCtx // neighbours in a node's inflightWrites, guarded by its mu
}

// afterFunc is one func registered with callCtx.AfterFunc.
type afterFunc struct{ f func() }

// newCallCtx returns a context that ends at deadline or on cancel. A parent that can end on
// its own gets context.WithDeadline instead.
func newCallCtx(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if parent.Done() != nil {
		return context.WithDeadline(parent, deadline)
	}
	c := &callCtx{parent: parent, deadline: deadline}
	return c, c.cancel
}

// newCall is newCallCtx without the CancelFunc's allocation when parent never ends: it
// returns the call context as c too, and the caller ends it with c.cancel(); otherwise c is
// nil and the caller calls cancel (context.WithDeadline's). At one message per batch every
// write makes one.
func newCall(parent context.Context, deadline time.Time) (ctx context.Context, c *callCtx, cancel context.CancelFunc) {
	if parent.Done() != nil {
		ctx, cancel = context.WithDeadline(parent, deadline)
		return ctx, nil, cancel
	}
	c = &callCtx{parent: parent, deadline: deadline}
	return c, c, nil
}

// newCallIn is newCall that makes the call context in in (zeroed memory of the caller's, used
// once) when it is not nil.
func newCallIn(parent context.Context, deadline time.Time, in *callCtx) (ctx context.Context, c *callCtx, cancel context.CancelFunc) {
	if in == nil || parent.Done() != nil {
		return newCall(parent, deadline)
	}
	in.parent, in.deadline = parent, deadline
	return in, in, nil
}

// newDetachedCall is newCallCtx on context.Background(), as a *callCtx: its caller ends it
// with c.cancel(), without the CancelFunc's allocation (a settle per batch makes one).
func newDetachedCall(deadline time.Time) *callCtx {
	return &callCtx{parent: context.Background(), deadline: deadline}
}

// Deadline returns the call's deadline.
func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Value returns the parent's value for key.
func (c *callCtx) Value(key any) any { return c.parent.Value(key) }

// Done returns a channel closed when the call's context ends, arming the deadline's timer.
func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked()
	return c.done
}

// Err returns nil, context.Canceled or context.DeadlineExceeded.
func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	// time.Until reads only the monotonic clock (the deadline has a monotonic reading): a
	// backend checks its call's context once or twice per call.
	if c.err == nil && time.Until(c.deadline) <= 0 {
		c.endLocked(context.DeadlineExceeded)
	}
	return c.err
}

// AfterFunc runs f in its own goroutine once the context ends (context.AfterFunc uses it, and
// so does a child context made with context.WithCancel, instead of a goroutine that waits).
func (c *callCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked()
	a := &afterFunc{f: f}
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	if c.funcs == nil {
		c.funcs = make(map[*afterFunc]struct{})
	}
	c.funcs[a] = struct{}{}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.funcs[a]
		delete(c.funcs, a)
		return ok
	}
}

// armLocked makes the done channel and, while the context has not ended, the timer.
func (c *callCtx) armLocked() {
	if c.done != nil {
		return
	}
	c.done = make(chan struct{})
	switch d := time.Until(c.deadline); {
	case c.err != nil:
		close(c.done)
	case d <= 0:
		c.endLocked(context.DeadlineExceeded)
	default:
		c.timer = time.AfterFunc(d, c.expire)
	}
}

// expire ends the context at its deadline.
func (c *callCtx) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLocked(context.DeadlineExceeded)
}

// cancel ends the context (the CancelFunc newCallCtx returns).
func (c *callCtx) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLocked(context.Canceled)
}

// endLocked ends the context with err unless it has ended already.
func (c *callCtx) endLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.done != nil {
		close(c.done)
	}
	for a := range c.funcs {
		go a.f()
	}
	c.funcs = nil
}

// shorten moves the deadline to d when d is earlier (Close bounding a write in progress).
func (c *callCtx) shorten(d time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || !d.Before(c.deadline) {
		return
	}
	c.deadline = d
	if c.timer != nil {
		c.timer.Reset(time.Until(d))
	}
}

// shortenCall moves ctx's deadline to d when ctx is a call context of newCallCtx's own (a
// context.WithDeadline one, whose parent can end, keeps its deadline).
func shortenCall(ctx context.Context, d time.Time) {
	if c, ok := ctx.(*callCtx); ok {
		c.shorten(d)
	}
}

// inflightWrites is the set of a node's backend writes in progress (their call contexts), so
// that Close can bound the ones a hung backend holds. The zero value is ready to use.
//
// The set is a list threaded through the contexts themselves (callCtx.prev and next): a write
// registers and leaves with a pointer swap under an uncontended lock, with no allocation and
// no hashing (a map and a removal closure were a third of a one-message write's own cost).
type inflightWrites struct {
	mu   sync.Mutex
	head *callCtx
}

// add registers ctx while its write runs and returns the context to pass to remove. Only the
// node's own call contexts can be shortened; any other context is not registered (nil).
func (w *inflightWrites) add(ctx context.Context) *callCtx {
	c, ok := ctx.(*callCtx)
	if !ok {
		return nil
	}
	w.mu.Lock()
	c.next = w.head
	if w.head != nil {
		w.head.prev = c
	}
	w.head = c
	w.mu.Unlock()
	return c
}

// remove unregisters c, a context add returned (nil: nothing to do).
func (w *inflightWrites) remove(c *callCtx) {
	if c == nil {
		return
	}
	w.mu.Lock()
	if c.prev != nil {
		c.prev.next = c.next
	} else if w.head == c {
		w.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
	w.mu.Unlock()
}

// shorten moves the deadline of every registered write to d when d is earlier.
func (w *inflightWrites) shorten(d time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := w.head; c != nil; c = c.next {
		c.shorten(d)
	}
}
