package drain

import (
	"fmt"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

// oldBackend is one backend being drained. It stays open until the wrapper is closed: a
// drained one is re-checked every RecheckInterval.
type oldBackend struct {
	b      core.Backend
	name   string
	settle time.Duration // core.DepthsSettle(b): 0 when its Depths are exact

	mu            sync.Mutex
	drained       bool // found empty: not polled, only re-checked
	drainedAt     time.Time
	closed        bool
	zeros         int       // consecutive empty checks
	zeroSince     time.Time // when the first of those checks started
	checkedQueues int       // size of the queue set of the last check
	lastCheck     time.Time // when the last drain check started
	lastDepth     core.Depth
	gates         map[string]*exclusive // per exclusive queue: may the primary run it?
	failing       bool                  // the last call failed
	restUntil     time.Time             // after a failure, not asked again before this
	pubs          int64                 // batches of a key it held published to it (see published)
}

// exclusive is the old-first clearance of one exclusive queue on one old backend.
type exclusive struct {
	zeroSince time.Time // first of the current run of empty readings; zero: the last was not
	granted   time.Time // when the primary was last allowed to run the queue
	confirmed bool      // the primary has claimed a batch of the queue since it was granted
}

// acquire reports whether o may be used (it is not closed).
func (o *oldBackend) acquire() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.closed
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

// gate returns the clearance of queue q; o.mu is held.
func (o *oldBackend) gate(q string) *exclusive {
	g := o.gates[q]
	if g == nil {
		g = &exclusive{}
		o.gates[q] = g
	}
	return g
}

// closeNow closes o unless it is closed already.
func (o *oldBackend) closeNow() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	o.mu.Unlock()
	return o.b.Close()
}

// closedErr is the error of a settle on a closed old backend: the wrapper was closed, so the
// claim can no longer be settled and its lease will run out.
func (o *oldBackend) closedErr(c *core.Claim) error {
	return fmt.Errorf("%w: batch %s of queue %q came from old backend %s, which is closed; its lease runs out and it runs again", core.ErrLeaseLost, c.ID, c.Queue, o.name)
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
// a no-op, as the contract requires, even after the origin was closed.
func (h *handle) settle(c *core.Claim, fn func(core.Backend) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.settled {
		return nil
	}
	if !h.o.acquire() {
		return h.o.closedErr(c)
	}
	err := fn(h.o.b)
	if err == nil {
		h.settled = true
	}
	return err
}
