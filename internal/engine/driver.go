package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// driveLoop is the node's polling driver: it asks the backend for exactly the free slots of each
// queue this node listens to, takes each slot before handing the batch to a worker, and wakes at
// once when a slot of a full queue frees up.
func (n *Engine) driveLoop() {
	defer n.loops.Done()
	failures, fastEmpty := 0, 0
	for n.stopCtx.Err() == nil {
		if n.frozen.Load() {
			n.pause(n.opts.PollWait) // Thaw wakes it
			continue
		}
		// One clock read per turn (at one message per batch the driver turns about once per
		// batch): the turn's start, the fetch's start and the base of its deadline.
		start := time.Now()
		n.driverTurn.Store(start.UnixNano())
		req := n.fetchRequest(start)
		if len(req.Queues) == 0 {
			n.pause(n.idlePause()) // woken by a freed slot; a cap func may have been raised
			continue
		}
		claims, err := n.fetch(req, start)
		for _, c := range claims {
			n.dispatch(c)
		}
		n.releaseTokens(claims)
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
					n.pause(min(req.Wait, emptyFetchPause))
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
func (n *Engine) pause(d time.Duration) {
	select {
	case <-n.wake: // already woken (a slot freed meanwhile): no timer
		return
	default:
	}
	if n.pauseTimer == nil {
		n.pauseTimer = time.NewTimer(d)
	} else {
		n.pauseTimer.Reset(d)
	}
	defer n.pauseTimer.Stop()
	select {
	case <-n.wake:
	case <-n.stopCtx.Done():
	case <-n.pauseTimer.C:
	}
}

// fetchBackoff spaces failed fetches: 100 ms doubling to 5 s, with jitter.
func fetchBackoff(failures int) time.Duration {
	return Backoff(100*time.Millisecond, 5*time.Second)(failures)
}

// fetchRequest computes this node's free slots at now, as a normalised request (core.FetchRequest.Normalize):
// Exclusive queues ask for one batch when none runs here; capped queues for the cap minus what
// runs (a cap func is re-read now, outside the node's lock since it is app code that may call
// the node), at most FetchMax; uncapped queues for FetchMax. Full queues are left out and
// remembered, so a freed slot can interrupt the fetch.
func (n *Engine) fetchRequest(now time.Time) core.FetchRequest {
	req := core.FetchRequest{Node: n.id, Lease: n.opts.Lease, Wait: n.opts.PollWait, Max: n.opts.FetchMax}
	n.mu.Lock()
	n.stale = false
	// Only the driver calls fetchRequest: it reuses its slices and map (at one message per
	// batch it runs about once per batch).
	specs := n.reqSpecs[:0]
	for _, l := range n.listeners {
		specs = append(specs, l.Spec)
	}
	n.reqSpecs = specs
	n.mu.Unlock()
	limits := slices.Grow(n.reqLimits[:0], len(specs))[:len(specs)]
	n.reqLimits = limits
	for i, s := range specs {
		limits[i] = core.Unlimited
		if !s.Exclusive {
			limits[i] = s.limit()
		}
	}
	granted, tokenWait := n.takeTokens(specs, limits) // rate-limited queues: see ratelimit.go
	n.tokenWait = tokenWait
	if tokenWait > 0 {
		req.Wait = min(req.Wait, tokenWait) // come back for the queue whose bucket is empty
	}
	n.mu.Lock()
	defer func() {
		n.mu.Unlock()
		n.holdTokens(granted, req)
	}()
	if n.fetching == nil {
		n.fetching = make(map[string]bool, len(specs))
	}
	clear(n.fetching)
	for i, s := range specs {
		if n.isPaused(s.Name) {
			continue // paused cluster-wide (NodeOptions.Pauses)
		}
		if until, ok := n.steppedBack[s.Name]; ok {
			if now.Before(until) {
				continue // this node lost a lease of the queue a moment ago: see stepBack
			}
			delete(n.steppedBack, s.Name)
		}
		busy := n.inflight[s.Name]
		free := core.Unlimited
		if s.Exclusive {
			free = 1 - busy
		} else if limits[i] != core.Unlimited {
			free = limits[i] - busy
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
		req.Queues = append(req.Queues, core.QueueSlots{Queue: s.Name, Free: free, Exclusive: s.Exclusive, Ordered: s.Ordered})
		n.fetching[s.Name] = true
	}
	return req
}

// fetch runs one Fetch (now: about its start) on a context detached from shutdown, but interruptible by Close, a new
// listener and a freed slot; a claim made before the interruption is still returned by the
// adapter. A request that went stale before the Fetch started is not sent. Whatever error an
// interrupted Fetch returns is not a failure.
func (n *Engine) fetch(req core.FetchRequest, now time.Time) ([]*core.Claim, error) {
	ctx, cancel := newCallCtx(context.Background(), now.Add(req.Wait+n.opts.ClaimTimeout))
	defer cancel()
	n.mu.Lock()
	if n.stale || n.closed || n.frozen.Load() {
		n.mu.Unlock()
		return nil, nil
	}
	n.fetchCancel = cancel
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.fetchCancel = nil
		n.mu.Unlock()
	}()
	claims, err := n.backendFetch(ctx, req)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		err = nil // our own interruption, whatever the adapter made of it
	}
	return claims, err
}

// backendFetch calls the adapter's Fetch, turning its panic into an error.
func (n *Engine) backendFetch(ctx context.Context, req core.FetchRequest) (claims []*core.Claim, err error) {
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
func (n *Engine) dispatch(c *core.Claim) {
	n.mu.Lock()
	l := n.listeners[c.Queue]
	halted, closed := n.halted.Load(), n.closed
	paused := n.isPaused(c.Queue)
	start := l != nil && !closed && !paused
	if start {
		n.inflight[c.Queue]++
		n.workers.Add(1) // under n.mu, ordered before Close's Wait (closed is set under n.mu)
	}
	n.mu.Unlock()
	switch {
	case halted:
	case start:
		n.pool.runWork(n.stopCtx.Done(), n, l, c)
	case closed, paused: // paused: fetched before this node saw the pause
		n.giveBack(c)
	default:
		n.log.Error("txmq: backend returned a batch of a queue this node did not ask for; releasing it", "queue", c.Queue, "batch", c.ID)
		n.giveBack(c)
	}
}

// giveBack releases a claim this node will not run, without spending a run on it: the body's
// attempt count absorbs earlier unsettled deliveries but not this one.
func (n *Engine) giveBack(c *core.Claim) {
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
func (n *Engine) release(queue string) {
	n.mu.Lock()
	n.inflight[queue]--
	if n.inflight[queue] <= 0 {
		delete(n.inflight, queue)
	}
	var interrupt context.CancelFunc
	if !n.fetching[queue] {
		if interrupt = n.fetchCancel; interrupt == nil {
			n.stale = true
		}
	}
	n.mu.Unlock()
	n.signal()
	if interrupt != nil {
		interrupt()
	}
}
