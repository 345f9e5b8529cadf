package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

// Options configures a Backend. A nil *Options, and every zero field, means the default.
type Options struct {
	// Clock returns the current time, used for due times and leases. Default time.Now. Waiting
	// in Fetch always uses real timers, so tests with a fake clock should fetch with Wait 0.
	Clock func() time.Time

	// Seed seeds the random pick among due batches. Default 0: a random seed. Set it when a
	// test wants a reproducible (still non-FIFO) delivery order.
	Seed uint64
}

// Backend is an in-process core.Backend. It is safe for concurrent use by any number of nodes;
// every node handed the same *Backend shares its queues. The zero value is not usable: call New.
type Backend struct {
	clock func() time.Time
	name  string // set by Open for a named backend

	mu     sync.Mutex
	rng    *rand.Rand
	queues map[string]*queue
	broken bool
	closed bool
	done   chan struct{} // closed by Close; wakes waiting fetches
}

var _ core.Backend = (*Backend)(nil)

// New returns an empty Backend configured by opts (nil means every default).
func New(opts *Options) *Backend {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	seed1, seed2 := o.Seed, o.Seed^0x9e3779b97f4a7c15
	if o.Seed == 0 {
		seed1, seed2 = rand.Uint64(), rand.Uint64()
	}
	return &Backend{
		clock:  o.Clock,
		rng:    rand.New(rand.NewPCG(seed1, seed2)),
		queues: make(map[string]*queue),
		done:   make(chan struct{}),
	}
}

// Publish stores the batch, claimable once its delay (b.DelayFrom) has passed on the backend's
// clock. It stores a copy of b.Body (the caller may reuse its buffer once Publish returns),
// and claims hand out that copy, read-only, so a large batch is held once.
func (be *Backend) Publish(ctx context.Context, b core.OutgoingBatch) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: publish batch %s to queue %q: %w", b.ID, b.Queue, err)
	}
	if b.Queue == "" {
		return fmt.Errorf("%w: memory: publish batch %s: the queue name is empty; pass the declared queue name", core.ErrInvalidConfig, b.ID)
	}
	// The record and the body's copy are made before the lock: every Fetch, settle and
	// Publish of the backend waits for it. A body nothing changes again is kept as it is.
	body := b.Body
	if !b.BodyFixed {
		body = clone(body)
	}
	rec := &record{id: b.ID, body: body, lead: max(b.Lead, 0), fair: b.FairKey}
	be.mu.Lock()
	defer be.mu.Unlock()
	if err := be.usableLocked("publish", b.Queue); err != nil {
		return err
	}
	now := be.clock()
	q := be.queueLocked(b.Queue)
	rec.q = q
	q.advance(now)
	if b.DedupWindow > 0 {
		if taken := q.marks.taken(b.DedupIDs, now); len(taken) > 0 {
			return &core.DuplicateError{Queue: b.Queue, IDs: taken}
		}
		q.marks.hold(b.DedupIDs, now.Add(b.DedupWindow))
	}
	if b.Unique.Mode != 0 {
		if stored, err := q.uniqueLocked(b, rec, now); stored || err != nil {
			return err
		}
	}
	if rec.lead > 0 && !q.ranked {
		q.rankReady()
	}
	if rec.fair != "" && q.fair == nil {
		q.makeFair()
	}
	if b.Key != "" {
		var due time.Time
		if d := b.DelayFrom(now); d > 0 {
			due = now.Add(d)
		}
		q.pushKeyed(rec, b.Key, due, now)
	} else if d := b.DelayFrom(now); d > 0 {
		q.pushDelayed(rec, now.Add(d))
	} else {
		q.pushReady(rec, now)
	}
	q.notify()
	return nil
}

// Depths reports the ready, in-flight and delayed batches of each named queue; a queue never
// seen reports zeros. Batches of an ordered key waiting behind an earlier one count as delayed.
// OldestReady is when the longest-waiting ready batch became claimable (its publish, due time,
// retry or lease end), found by a scan of the queue's ready batches.
func (be *Backend) Depths(ctx context.Context, queues []string) (map[string]core.Depth, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory: depths: %w", err)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if err := be.usableLocked("depths", ""); err != nil {
		return nil, err
	}
	now := be.clock()
	out := make(map[string]core.Depth, len(queues))
	for _, name := range queues {
		q, ok := be.queues[name]
		if !ok {
			out[name] = core.Depth{}
			continue
		}
		q.advance(now)
		out[name] = core.Depth{
			Ready:       int64(q.readyLen()),
			InFlight:    int64(q.inflight.Len()),
			Delayed:     int64(q.delayed.Len() + q.held),
			OldestReady: q.oldestReady(),
		}
	}
	return out, nil
}

// Close wakes waiting fetches and makes every later call fail with an error wrapping
// core.ErrClosed. Stored batches are discarded with the Backend. Closing twice is a no-op.
func (be *Backend) Close() error {
	be.mu.Lock()
	if !be.closed {
		be.closed = true
		close(be.done)
	}
	be.mu.Unlock()
	be.forget()
	return nil
}

// Break simulates a backend outage, for tests: until Restore, every call (Fetch included, and
// fetches already waiting) fails with an error wrapping core.ErrBackendUnavailable. Stored
// batches and leases are kept, and leases keep running out as they would in a real outage.
func (be *Backend) Break() { be.setBroken(true) }

// Restore ends an outage started by Break, for tests.
func (be *Backend) Restore() { be.setBroken(false) }

// setBroken starts or ends a simulated outage and wakes every waiting fetch.
func (be *Backend) setBroken(broken bool) {
	be.mu.Lock()
	defer be.mu.Unlock()
	be.broken = broken
	for _, q := range be.queues {
		q.notify()
	}
}

// usableLocked returns the error for a call made while closed or broken; op names the call
// and queue, when not empty, its queue.
func (be *Backend) usableLocked(op, queue string) error {
	if !be.closed && !be.broken {
		return nil
	}
	where := op
	if queue != "" {
		where = fmt.Sprintf("%s (queue %q)", op, queue)
	}
	if be.closed {
		return fmt.Errorf("memory: %s: the backend was closed; create a new one with memory.New: %w", where, core.ErrClosed)
	}
	return fmt.Errorf("memory: %s: simulated outage (Break was called; call Restore to end it): %w", where, core.ErrBackendUnavailable)
}

// queueLocked returns the state of the named queue, creating it on first use.
func (be *Backend) queueLocked(name string) *queue {
	q, ok := be.queues[name]
	if !ok {
		q = &queue{name: name}
		be.queues[name] = q
	}
	return q
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	out := make([]byte, len(b))
	copy(out, b)
	return out
}

// FetchesInProcess reports true: Fetch claims inside this process (core.InProcessFetcher), so
// a node's fetch loop lets its ready workers run before each Fetch and claims for every slot
// they freed at once.
func (be *Backend) FetchesInProcess() bool { return true }

var _ core.InProcessFetcher = (*Backend)(nil)
