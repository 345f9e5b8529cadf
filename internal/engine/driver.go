package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// driver is the consume half's front: it owns the listeners, the slots (batches in flight
// per queue), the fetch in progress and what interrupts it, the step-back after a lost
// lease, and the rate-limit tokens a fetch holds. mu guards the listeners, the slots, the
// fetch state and closed; the request buffers, pauseTimer and the tokens are touched by the
// driver's goroutine only. e is the engine, for the shared things.
type driver struct {
	e           *Engine
	mu          sync.Mutex
	listeners   map[string]*Listener
	inflight    map[string]int       // batches holding a slot, per queue
	steppedBack map[string]time.Time // queue -> until when it is left out of fetches (stepBack)
	fetching    map[string]bool      // queues of the last fetch request
	fetchCancel context.CancelFunc   // interrupts the Fetch in progress, if any
	stale       bool                 // the request being prepared misses a freed slot or a new listener
	started     bool
	closed      bool // no more Start, Listen, fetch or new workers (set by Close and Halt)

	reqSpecs   []*Spec // fetchRequest's buffers (the driver's own, outside mu)
	reqLimits  []int
	dispatched []dispatchStep // dispatchAll's buffer (the driver's own, outside mu)
	pauseTimer *time.Timer    // the driver's (pause)

	tokens    map[string]int // starts the Admitter granted the pending fetch (driver only)
	tokenWait time.Duration  // until the Admitter may grant a queue that got none (driver only)

	driverTurn atomic.Int64  // Start, then each driver loop iteration's start (UnixNano); 0 before Start
	wake       chan struct{} // wakes the driver's pause (a freed slot, a new listener, Thaw)
}

// init sets the driver up for e.
func (dr *driver) init(e *Engine) {
	dr.e = e
	dr.listeners = make(map[string]*Listener)
	dr.inflight = make(map[string]int)
	dr.steppedBack = make(map[string]time.Time)
	dr.wake = make(chan struct{}, 1)
}

// addListener registers l, the one listener of its queue; a fetch in progress or about to
// start is interrupted, so that the next one asks for the new queue.
func (dr *driver) addListener(l *Listener) error {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.closed {
		return fmt.Errorf("%w: queue %q: cannot listen on a closed node", core.ErrClosed, l.Spec.Name)
	}
	if _, dup := dr.listeners[l.Spec.Name]; dup {
		return fmt.Errorf("%w: queue %q already has a listener on this node: one listener per queue per node; put the branching inside it", core.ErrInvalidConfig, l.Spec.Name)
	}
	dr.listeners[l.Spec.Name] = l
	dr.signal()
	if c := dr.fetchCancel; c != nil {
		c() // the fetch in progress does not ask for the new queue
	} else {
		dr.stale = true // nor does the one about to start
	}
	return nil
}

// listener returns the listener of queue, nil if none.
func (dr *driver) listener(queue string) *Listener {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	return dr.listeners[queue]
}

// start marks the driver started (once, and not after Close); the engine starts its loop.
func (dr *driver) start() error {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.closed {
		return fmt.Errorf("%w: node %s: Start after Close or Halt; a closed node cannot restart, create a new node", core.ErrClosed, dr.e.id)
	}
	if dr.started {
		return fmt.Errorf("%w: node %s is already started: call Start once per node", core.ErrInvalidConfig, dr.e.id)
	}
	dr.started = true
	dr.driverTurn.Store(time.Now().UnixNano()) // the driver is due to turn from now on (Live)
	return nil
}

// markClosed closes the driver to new listeners, fetches and workers, running also (under
// its lock, so before any dispatch sees the close) when it is the first; it reports whether
// it was.
func (dr *driver) markClosed(also func()) bool {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.closed {
		return false
	}
	dr.closed = true
	if also != nil {
		also()
	}
	return true
}

// lastTurn returns when the loop last began an iteration (UnixNano), 0 before Start.
func (dr *driver) lastTurn() int64 { return dr.driverTurn.Load() }

// driveLoop is the node's polling driver: it asks the backend for exactly the free slots of each
// queue this node listens to, takes each slot before handing the batch to a worker, and wakes at
// once when a slot of a full queue frees up.
func (dr *driver) driveLoop() {
	n := dr.e
	defer n.loops.Done()
	failures, fastEmpty := 0, 0
	yield := core.FetchesInProcess(n.backend)
	for n.stopCtx.Err() == nil {
		if n.frozen.Load() {
			dr.pause(n.opts.PollWait) // Thaw wakes it
			continue
		}
		if yield {
			// The backend claims in this process (core.InProcessFetcher): let the goroutines
			// ready to run go first (the workers of the batches just dispatched, the ones
			// finishing theirs). At one message per batch the driver was woken by each freed
			// slot and fetched one batch per turn, a Fetch and a wake-up per message; yielding
			// once, the turn asks for every slot freed meanwhile. It costs nothing when no
			// other goroutine waits for a processor, and the wake-up is still at once.
			runtime.Gosched()
		}
		// One clock read per turn (at one message per batch the driver turns about once per
		// batch): the turn's start, the fetch's start and the base of its deadline.
		start := time.Now()
		dr.driverTurn.Store(start.UnixNano())
		req := dr.fetchRequest(start)
		if len(req.Queues) == 0 {
			dr.pause(dr.idlePause()) // woken by a freed slot; a cap func may have been raised
			continue
		}
		claims, err := dr.fetch(req, start)
		dr.dispatchAll(claims)
		dr.releaseTokens(claims)
		switch {
		case err != nil && n.stopCtx.Err() == nil:
			failures++
			delay := fetchBackoff(failures)
			if isUnavailable(err) {
				n.log.Warn("txmq: backend unavailable; fetching again later", "error", err, "retry_in", delay, "failures", failures)
			} else {
				n.log.Error("txmq: fetch failed; fetching again later", "error", err, "retry_in", delay, "failures", failures)
			}
			select {
			case <-time.After(delay):
			case <-n.stopCtx.Done():
			}
		case err == nil:
			failures = 0
			// An adapter that returns nothing long before Wait (ignoring it, or interrupted)
			// must not make the loop spin: from the second such fetch in a row, wait a little,
			// unless a freed slot or a new listener wakes the loop first.
			if len(claims) == 0 && time.Since(start) < req.Wait/10 {
				if fastEmpty++; fastEmpty >= 2 {
					dr.pause(min(req.Wait, emptyFetchPause))
				}
			} else {
				fastEmpty = 0
			}
		}
	}
}

// emptyFetchPause is the longest pause after fetches that returned nothing at once.
const emptyFetchPause = 50 * time.Millisecond

// pause waits for d, a wake-up or the stop. Only the driver pauses: it reuses one timer (at
// one message per batch the driver pauses about once per batch while its queues are full).
func (dr *driver) pause(d time.Duration) {
	n := dr.e
	select {
	case <-dr.wake: // already woken (a slot freed meanwhile): no timer
		return
	default:
	}
	if dr.pauseTimer == nil {
		dr.pauseTimer = time.NewTimer(d)
	} else {
		dr.pauseTimer.Reset(d)
	}
	defer dr.pauseTimer.Stop()
	select {
	case <-dr.wake:
	case <-n.stopCtx.Done():
	case <-dr.pauseTimer.C:
	}
}

// fetchBackoff spaces failed fetches: 100 ms doubling to 5 s, with jitter.
func fetchBackoff(failures int) time.Duration {
	return Backoff(100*time.Millisecond, 5*time.Second)(failures)
}

// fetchRequest computes this node's free slots at now, as a normalised request (core.FetchRequest.Normalize):
// Exclusive queues ask for one batch when none runs here, queues with a ClusterLimit for at most
// the limit minus what runs here; capped queues for the cap minus what
// runs (a cap func is re-read now, outside the node's lock since it is app code that may call
// the node), at most FetchMax; uncapped queues for FetchMax. Full queues are left out and
// remembered, so a freed slot can interrupt the fetch.
func (dr *driver) fetchRequest(now time.Time) core.FetchRequest {
	n := dr.e
	req := core.FetchRequest{Node: n.id, Lease: n.opts.Lease, Wait: n.opts.PollWait, Max: n.opts.FetchMax}
	dr.mu.Lock()
	dr.stale = false
	// Only the driver calls fetchRequest: it reuses its slices and map (at one message per
	// batch it runs about once per batch).
	specs := dr.reqSpecs[:0]
	for _, l := range dr.listeners {
		specs = append(specs, l.Spec)
	}
	dr.reqSpecs = specs
	dr.mu.Unlock()
	limits := slices.Grow(dr.reqLimits[:0], len(specs))[:len(specs)]
	dr.reqLimits = limits
	for i, s := range specs {
		limits[i] = core.Unlimited
		if !s.Exclusive {
			limits[i] = s.limit()
		}
	}
	granted, tokenWait := dr.admit(specs, limits) // rate-limited queues: see admit.go
	dr.tokenWait = tokenWait
	if tokenWait > 0 {
		req.Wait = min(req.Wait, tokenWait) // come back for the queue whose bucket is empty
	}
	dr.mu.Lock()
	defer func() {
		dr.mu.Unlock()
		dr.holdTokens(granted, req)
	}()
	if dr.fetching == nil {
		dr.fetching = make(map[string]bool, len(specs))
	}
	clear(dr.fetching)
	for i, s := range specs {
		if n.held(s.Name) {
			continue // held back by a Gate (paused cluster-wide)
		}
		if until, ok := dr.steppedBack[s.Name]; ok {
			if now.Before(until) {
				continue // this node lost a lease of the queue a moment ago: see stepBack
			}
			delete(dr.steppedBack, s.Name)
		}
		busy := dr.inflight[s.Name]
		free := core.Unlimited
		if s.Exclusive {
			free = 1 - busy
		} else if limits[i] != core.Unlimited {
			free = limits[i] - busy
		}
		if s.ClusterLimit > 0 && (free == core.Unlimited || free > s.ClusterLimit-busy) {
			free = s.ClusterLimit - busy // this node never asks for more than the cluster may run
		}
		if free != core.Unlimited && free <= 0 {
			continue // at capacity: a cap is reached at >=
		}
		if g, limited := granted[s.Name]; limited {
			if g == 0 {
				continue // no start token: the queue's rate limit is used up for now
			}
			if free == core.Unlimited || g < free {
				free = g
			}
		}
		if free == core.Unlimited || free > req.Max {
			free = req.Max
		}
		req.Queues = append(req.Queues, core.QueueSlots{Queue: s.Name, Free: free, Exclusive: s.Exclusive, Ordered: s.Ordered, Prioritized: s.Prioritized, Fair: s.Fair, Limit: s.ClusterLimit, KeyLimit: s.KeyLimit})
		dr.fetching[s.Name] = true
	}
	return req
}

// fetch runs one Fetch (now: about its start) on a context detached from shutdown, but interruptible by Close, a new
// listener and a freed slot; a claim made before the interruption is still returned by the
// adapter. A request that went stale before the Fetch started is not sent. Whatever error an
// interrupted Fetch returns is not a failure.
func (dr *driver) fetch(req core.FetchRequest, now time.Time) ([]*core.Claim, error) {
	n := dr.e
	ctx, cancel := newCallCtx(context.Background(), now.Add(req.Wait+n.opts.ClaimTimeout))
	defer cancel()
	dr.mu.Lock()
	if dr.stale || dr.closed || n.frozen.Load() {
		dr.mu.Unlock()
		return nil, nil
	}
	dr.fetchCancel = cancel
	dr.mu.Unlock()
	defer func() {
		dr.mu.Lock()
		dr.fetchCancel = nil
		dr.mu.Unlock()
	}()
	claims, err := dr.backendFetch(ctx, req)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		err = nil // our own interruption, whatever the adapter made of it
	}
	return claims, err
}

// backendFetch calls the adapter's Fetch, turning its panic into an error.
func (dr *driver) backendFetch(ctx context.Context, req core.FetchRequest) (claims []*core.Claim, err error) {
	n := dr.e
	err = safeCall("backend Fetch", func() error {
		var ferr error
		claims, ferr = n.backend.Fetch(ctx, req)
		return ferr
	})
	return claims, err
}

// dispatch takes the claim's slot and starts its worker. A claim that arrives after Close
// began (from the interrupted fetch) or for a queue this node does not listen to (an adapter
// bug) is given back at once, unrun; after Halt it is stranded, as in a crash.
func (dr *driver) dispatch(c *core.Claim) {
	n := dr.e
	dr.mu.Lock()
	l := dr.listeners[c.Queue]
	halted, closed := n.halted.Load(), dr.closed
	paused := n.held(c.Queue)
	start := l != nil && !closed && !paused
	if start {
		dr.inflight[c.Queue]++
		n.run.admit() // under dr.mu, ordered before Close's Wait (closed is set under dr.mu)
	}
	dr.mu.Unlock()
	switch {
	case halted:
	case start:
		n.run.start(l, c)
	case closed, paused: // paused: fetched before this node saw the pause
		n.run.giveBack(c)
	default:
		n.log.Error("txmq: backend returned a batch of a queue this node did not ask for; releasing it", "queue", c.Queue, "batch", c.ID)
		n.run.giveBack(c)
	}
}

// giveBack releases a claim this node will not run, without spending a run on it: the body's
// attempt count absorbs earlier unsettled deliveries but not this one.
func (rn *runner) giveBack(c *core.Claim) {
	n := rn.e
	body := c.Body
	if c.Deliveries > 1 {
		if e, err := envelope.Decode(body); err == nil {
			e.Attempt += c.Deliveries - 1
			body = envelope.Encode(e)
		}
	}
	ctx, cancel := n.claimCtx()
	defer cancel()
	if err := safeCall("backend Retry", func() error { return n.backend.Retry(ctx, c, body, 0) }); err != nil {
		n.log.Error("txmq: releasing an unrun batch failed; it returns after its lease", "queue", c.Queue, "batch", c.ID, "error", err)
	}
}

// release frees a slot and wakes the driver; if the queue was full (left out of the fetch in
// progress, or of the one about to start), that fetch is interrupted (or skipped) so the slot
// is used at once.
func (dr *driver) release(queue string) {
	dr.mu.Lock()
	dr.inflight[queue]--
	if dr.inflight[queue] <= 0 {
		delete(dr.inflight, queue)
	}
	var interrupt context.CancelFunc
	if !dr.fetching[queue] {
		if interrupt = dr.fetchCancel; interrupt == nil {
			dr.stale = true
		}
	}
	dr.mu.Unlock()
	dr.signal()
	if interrupt != nil {
		interrupt()
	}
}

// busy returns how many batches hold a slot (dispatched, their policy not done).
func (dr *driver) busy() int {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	left := 0
	for _, v := range dr.inflight {
		left += v
	}
	return left
}
