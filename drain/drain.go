package drain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core"
)

// Defaults of Options.
const (
	// DefaultCheckInterval is how often, at most, the depths of an old backend still polled
	// are checked.
	DefaultCheckInterval = 5 * time.Second
	// DefaultRecheckInterval is how often, at most, a drained old backend is checked again.
	DefaultRecheckInterval = 30 * time.Second
)

// Options configures New. Zero fields mean the documented defaults; nil means all defaults.
type Options struct {
	// Logger receives the drain events (an old backend drained, failing, reachable again).
	// Default slog.Default().
	Logger *slog.Logger
	// CheckInterval is the shortest time between two depth checks of one old backend that is
	// still polled. An old backend with exact depths is drained after two checks in a row
	// found it empty, so draining is noticed between one and two intervals after the last
	// batch left; one with approximate depths (core.ApproximateDepths) only after its checks
	// found it empty for its settle window and a lease. Default 5 s.
	CheckInterval time.Duration
	// RecheckInterval is the shortest time between two depth checks of a drained old
	// backend. A node not restarted yet may still publish to the old backend, so "drained"
	// is never final: a check that finds a batch there (ready, in flight or delayed) makes
	// the wrapper poll the old backend again. Re-checks go on as long as the wrapper runs;
	// see the package doc for when to remove the old backend from the configuration.
	// Default 30 s.
	RecheckInterval time.Duration
	// Names label the old backends in logs, in the order of New's old argument (for example
	// their redacted URLs). Default "old[0]", "old[1]", ...
	Names []string
}

// Backend is the drain wrapper New returns. It implements core.Backend; see the package doc
// for what each call does.
type Backend struct {
	primary  core.Backend
	olds     []*oldBackend
	log      *slog.Logger
	interval time.Duration
	recheck  time.Duration

	mu       sync.Mutex
	queues   map[string]bool // every queue Fetch was asked for so far
	maxLease time.Duration   // the longest lease Fetch was asked for so far

	closed    atomic.Bool
	closeCtx  context.Context // cancelled by Close: ends waiting fetches
	closeDone context.CancelFunc
}

var _ core.Backend = (*Backend)(nil)

// New returns a backend that publishes to primary and consumes from primary and from every
// old backend until that one is drained, re-checking drained ones (see Options). It takes
// ownership of every backend given: Close closes them all.
func New(primary core.Backend, old []core.Backend, opts *Options) core.Backend {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = DefaultCheckInterval
	}
	if o.RecheckInterval <= 0 {
		o.RecheckInterval = DefaultRecheckInterval
	}
	d := &Backend{primary: primary, log: o.Logger, interval: o.CheckInterval, recheck: o.RecheckInterval, queues: map[string]bool{}}
	d.closeCtx, d.closeDone = context.WithCancel(context.Background())
	for i, b := range old {
		if b == nil {
			continue
		}
		name := fmt.Sprintf("old[%d]", i)
		if i < len(o.Names) && o.Names[i] != "" {
			name = o.Names[i]
		}
		d.olds = append(d.olds, &oldBackend{b: b, name: name, settle: core.DepthsSettle(b), gates: map[string]*exclusive{}})
	}
	return d
}

// Draining returns the names of the old backends not drained (polled by Fetch) at the moment.
func (d *Backend) Draining() []string {
	var out []string
	for _, o := range d.olds {
		o.mu.Lock()
		if !o.drained {
			out = append(out, o.name)
		}
		o.mu.Unlock()
	}
	return out
}

// Publish stores the batch in the primary backend; a batch of an ordered queue whose key the
// old backend still holds goes to the old backend, behind that key's batches there.
func (d *Backend) Publish(ctx context.Context, b core.OutgoingBatch) error {
	if err := d.usable("publish"); err != nil {
		return err
	}
	o, err := d.holder(ctx, b)
	if err != nil {
		return err
	}
	if o != nil {
		o.published()
		err := o.b.Publish(ctx, b)
		o.published() // a depth check that overlapped the write must not count o empty
		return err
	}
	return d.primary.Publish(ctx, b)
}

// Fetch asks the old backends first (without waiting), then the primary with the slots left.
func (d *Backend) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	if err := d.usable("fetch"); err != nil {
		return nil, err
	}
	ctx, stop := d.closing(ctx)
	defer stop()
	req = req.Normalize()
	d.remember(req)
	left := append([]core.QueueSlots(nil), req.Queues...)
	var out []*core.Claim
	octx, cancel := oldContext(ctx)
	defer cancel()
	for _, o := range d.olds {
		if len(left) == 0 || !o.acquire() || o.resting(time.Now()) {
			continue
		}
		d.maybeCheck(ctx, octx, o)
		if o.isDrained() || o.resting(time.Now()) {
			continue
		}
		sub := req
		sub.Queues, sub.Wait, sub.Max = left, 0, maxLeft(req.Max, len(out))
		cs, err := o.b.Fetch(octx, sub)
		d.noteOld(ctx, o, "fetching from", err)
		for _, c := range cs {
			if c == nil {
				continue
			}
			out = append(out, wrap(o, c))
			if exclusiveIn(left, c.Queue) {
				o.revoke(c.Queue) // the old backend runs the queue again: the primary waits
			}
			left = take(left, c.Queue)
		}
	}
	gated := d.gateExclusive(ctx, octx, left)
	if len(out) == 0 && len(left) > 0 && len(gated) == 0 {
		// Every queue left waits for an old backend to clear it: wait a little (within the
		// request's Wait) instead of returning at once, so a node does not spin on the old
		// backends' Fetch and Depths while an exclusive queue is gated.
		pause(ctx, min(req.Wait, gatedPause, d.interval))
		return nil, nil
	}
	left = gated
	if len(left) == 0 || len(out) >= req.Max {
		return out, nil
	}
	sub := req
	sub.Queues, sub.Max = left, maxLeft(req.Max, len(out))
	if len(out) > 0 {
		sub.Wait = 0 // we have work: return it at once
	}
	cs, err := d.primary.Fetch(ctx, sub)
	d.confirm(sub.Queues, cs)
	out = append(out, cs...)
	if err != nil {
		if len(out) == 0 {
			if d.closed.Load() {
				return nil, d.usable("fetch")
			}
			return nil, err
		}
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			d.log.Warn("txmq drain: primary backend fetch failed; returning the old backends' claims", "error", err)
		}
	}
	return out, nil
}

// Ack acknowledges the claim on the backend it came from.
func (d *Backend) Ack(ctx context.Context, c *core.Claim) error {
	if err := d.usable("ack"); err != nil {
		return err
	}
	if h, ok := c.Handle.(*handle); ok {
		return h.settle(c, func(b core.Backend) error { return b.Ack(ctx, h.inner) })
	}
	return d.primary.Ack(ctx, c)
}

// Retry retries the claim on the backend it came from (an old backend keeps its own batches
// until they finish; see the package doc).
func (d *Backend) Retry(ctx context.Context, c *core.Claim, body []byte, delay time.Duration) error {
	if err := d.usable("retry"); err != nil {
		return err
	}
	if h, ok := c.Handle.(*handle); ok {
		return h.settle(c, func(b core.Backend) error { return b.Retry(ctx, h.inner, body, delay) })
	}
	return d.primary.Retry(ctx, c, body, delay)
}

// Drop drops the claim on the backend it came from.
func (d *Backend) Drop(ctx context.Context, c *core.Claim, reason string) error {
	if err := d.usable("drop"); err != nil {
		return err
	}
	if h, ok := c.Handle.(*handle); ok {
		return h.settle(c, func(b core.Backend) error { return b.Drop(ctx, h.inner, reason) })
	}
	return d.primary.Drop(ctx, c, reason)
}

// Extend extends the claim's lease on the backend it came from and updates c.LeaseUntil.
func (d *Backend) Extend(ctx context.Context, c *core.Claim, lease time.Duration) error {
	if err := d.usable("extend"); err != nil {
		return err
	}
	h, ok := c.Handle.(*handle)
	if !ok {
		return d.primary.Extend(ctx, c, lease)
	}
	if !h.o.acquire() {
		return h.o.closedErr(c)
	}
	err := h.o.b.Extend(ctx, h.inner, lease)
	c.LeaseUntil = h.inner.LeaseUntil
	return err
}

// Depths adds up the depths of the primary and of every old backend, drained ones included
// (a node still on the old setting may have published there since). OldestReady is the
// earliest non-zero one among them.
func (d *Backend) Depths(ctx context.Context, queues []string) (map[string]core.Depth, error) {
	if err := d.usable("depths"); err != nil {
		return nil, err
	}
	sum, err := d.primary.Depths(ctx, queues)
	if err != nil {
		return nil, err
	}
	out := make(map[string]core.Depth, len(queues))
	for q, v := range sum {
		out[q] = v
	}
	for _, o := range d.olds {
		if !o.acquire() {
			continue
		}
		m, err := o.b.Depths(ctx, queues)
		if err != nil {
			return nil, fmt.Errorf("txmq drain: depths of old backend %s: %w", o.name, err)
		}
		for q, v := range m {
			t := out[q]
			t.Ready += v.Ready
			t.InFlight += v.InFlight
			t.Delayed += v.Delayed
			if !v.OldestReady.IsZero() && (t.OldestReady.IsZero() || v.OldestReady.Before(t.OldestReady)) {
				t.OldestReady = v.OldestReady
			}
			out[q] = t
		}
	}
	return out, nil
}

// Close ends waiting fetches, closes the primary and every old backend not closed yet, and
// makes every later call fail with an error wrapping core.ErrClosed. Closing twice is a no-op.
func (d *Backend) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.closeDone()
	errs := []error{d.primary.Close()}
	for _, o := range d.olds {
		errs = append(errs, o.closeNow())
	}
	return errors.Join(errs...)
}

// noteOld records the outcome of a call to an old backend: a failure (other than ctx's own
// end: the node interrupted the fetch) is logged once per outage and rests o for
// restDelay, so that an old backend that hangs costs one bounded call per rest, not every
// Fetch; a success after failures is logged once.
func (d *Backend) noteOld(ctx context.Context, o *oldBackend, what string, err error) {
	if err != nil && ctx.Err() != nil {
		return
	}
	o.mu.Lock()
	was := o.failing
	o.failing = err != nil
	if err != nil {
		o.restUntil = time.Now().Add(d.restDelay())
	}
	o.mu.Unlock()
	switch {
	case err != nil && !was:
		d.log.Warn("txmq drain: "+what+" an old backend failed; still consuming from the primary, will ask again", "backend", o.name, "retry_in", d.restDelay(), "error", err)
	case err == nil && was:
		d.log.Info("txmq drain: old backend reachable again", "backend", o.name)
	}
}

// restDelay is how long an old backend that failed is left alone: CheckInterval, within
// [100 ms, 5 s].
func (d *Backend) restDelay() time.Duration {
	return min(max(d.interval, 100*time.Millisecond), 5*time.Second)
}

// errResting stands for the answer of an old backend left alone after a failure.
var errResting = errors.New("txmq drain: old backend resting after a failure")

// Old backends get at most this share of a Fetch's time, and at most maxOldWait, so that
// one that hangs leaves the primary the rest.
const (
	oldShare   = 3 // a third
	maxOldWait = 5 * time.Second
)

// oldContext returns the context of the old backends' calls in one Fetch: ctx bounded to a
// third of its remaining time, and to maxOldWait.
func oldContext(ctx context.Context) (context.Context, context.CancelFunc) {
	wait := maxOldWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/oldShare)
	}
	return context.WithTimeout(ctx, wait)
}

// gatedPause is the longest a Fetch waits when every queue it could ask the primary for is
// gated by an old backend: such queues are read about once a gatedPause per node.
const gatedPause = time.Second

// pause waits for d or ctx's end.
func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// take uses one slot of queue in left and drops the queue when it has none left.
func take(left []core.QueueSlots, queue string) []core.QueueSlots {
	for i := range left {
		if left[i].Queue != queue {
			continue
		}
		if left[i].Exclusive || left[i].Free == 1 {
			return append(left[:i:i], left[i+1:]...)
		}
		left[i].Free--
		return left
	}
	return left
}

// maxLeft is the Max for the next backend after got claims of a request's limit.
func maxLeft(limit, got int) int {
	return max(limit-got, 1)
}

func isZero(d core.Depth) bool { return d.Ready == 0 && d.InFlight == 0 && d.Delayed == 0 }

func allZero(m map[string]core.Depth) bool {
	for _, d := range m {
		if !isZero(d) {
			return false
		}
	}
	return true
}
