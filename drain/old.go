package drain

import (
	"fmt"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

// oldBackend is one backend being drained. users counts calls in progress, so that a drained
// backend is closed only once nothing uses it.
type oldBackend struct {
	b    core.Backend
	name string

	mu            sync.Mutex
	drained       bool
	closed        bool
	users         int
	zeros         int             // consecutive empty checks
	checkedQueues int             // size of the queue set of the last check
	lastCheck     time.Time       // when the last drain check started
	clear         map[string]bool // exclusive queues seen empty (they stay empty)
	failing       bool            // the last call failed
	restUntil     time.Time       // after a failure, not asked again before this
}

// acquire reports whether o may be used and, if so, counts a user until release.
func (o *oldBackend) acquire() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.drained || o.closed {
		return false
	}
	o.users++
	return true
}

// release ends a use; the last user of a drained backend closes it.
func (o *oldBackend) release() {
	o.mu.Lock()
	o.users--
	closeIt := o.drained && o.users == 0 && !o.closed
	if closeIt {
		o.closed = true
	}
	o.mu.Unlock()
	if closeIt {
		_ = o.b.Close()
	}
}

// resting reports whether o failed recently and is left alone until its rest ends.
func (o *oldBackend) resting(now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failing && now.Before(o.restUntil)
}

func (o *oldBackend) isDrained() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.drained
}

// closeNow closes o unless it is closed already.
func (o *oldBackend) closeNow() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed, o.drained = true, true
	o.mu.Unlock()
	return o.b.Close()
}

// drainedErr is the error of a settle on a drained (or closed) old backend: the backend holds
// no batch any more, so the claim's lease was lost.
func (o *oldBackend) drainedErr(c *core.Claim) error {
	return fmt.Errorf("%w: batch %s of queue %q came from old backend %s, which is drained or closed; it ran elsewhere", core.ErrLeaseLost, c.ID, c.Queue, o.name)
}

// handle is the Handle of a claim that came from an old backend.
type handle struct {
	o     *oldBackend
	inner *core.Claim

	mu      sync.Mutex
	settled bool
}

// wrap returns a copy of c whose Handle routes settles to o.
func wrap(o *oldBackend, c *core.Claim) *core.Claim {
	return &core.Claim{
		Queue: c.Queue, ID: c.ID, Body: c.Body, Deliveries: c.Deliveries, LeaseUntil: c.LeaseUntil,
		Handle: &handle{o: o, inner: c},
	}
}

// settle runs one Ack, Retry or Drop on the origin backend. Settling a settled claim again is
// a no-op, as the contract requires, even after the origin was drained and closed.
func (h *handle) settle(c *core.Claim, fn func(core.Backend) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.settled {
		return nil
	}
	if !h.o.acquire() {
		return h.o.drainedErr(c)
	}
	err := fn(h.o.b)
	h.o.release()
	if err == nil {
		h.settled = true
	}
	return err
}
