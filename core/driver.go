package core

import (
	"context"
	"errors"
	"time"
)

// driveLoop is the node's polling driver: it asks the backend for exactly the free slots of each
// queue this node listens to, takes each slot before handing the batch to a worker, and wakes at
// once when a slot of a full queue frees up.
func (n *Node) driveLoop() {
	defer n.loops.Done()
	failures := 0
	for n.stopCtx.Err() == nil {
		req := n.fetchRequest()
		if len(req.Queues) == 0 {
			select {
			case <-n.wake:
			case <-n.stopCtx.Done():
			case <-time.After(n.opts.PollWait):
				// A cap func may have been raised: look again.
			}
			continue
		}
		claims, err := n.fetch(req)
		if err != nil && n.stopCtx.Err() == nil {
			failures++
			delay := fetchBackoff(failures)
			n.log.Warn("txmq: fetch failed; retrying", "error", err, "retry_in", delay, "unavailable", isUnavailable(err))
			select {
			case <-time.After(delay):
			case <-n.stopCtx.Done():
			}
		} else if err == nil {
			failures = 0
		}
		for _, c := range claims {
			n.dispatch(c)
		}
	}
}

// fetchBackoff spaces failed fetches: 100 ms doubling to 5 s, with jitter.
func fetchBackoff(failures int) time.Duration {
	return ExponentialBackoff(100*time.Millisecond, 5*time.Second)(failures)
}

// fetchRequest computes this node's free slots. Exclusive queues ask for one batch when none
// runs here; capped queues for the cap minus what runs (a cap func is re-read now); uncapped
// queues for Unlimited. Full queues are left out and remembered, so a freed slot can interrupt
// the fetch.
func (n *Node) fetchRequest() FetchRequest {
	req := FetchRequest{Node: n.id, Lease: n.opts.Lease, Wait: n.opts.PollWait, Max: n.opts.FetchMax}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fetching = make(map[string]bool, len(n.listeners))
	for name, l := range n.listeners {
		busy := n.inflight[name]
		free := Unlimited
		if l.spec.exclusive {
			free = 1 - busy
		} else if limit := l.spec.conc.limit(); limit != Unlimited {
			free = limit - busy
		}
		if free != Unlimited && free <= 0 {
			continue // at capacity: a cap is reached at >=
		}
		req.Queues = append(req.Queues, QueueSlots{Queue: name, Free: free, Exclusive: l.spec.exclusive})
		n.fetching[name] = true
	}
	return req
}

// fetch runs one Fetch on a context detached from shutdown, but interruptible by Close and by a
// freed slot; a claim made before the interruption is still returned by the adapter.
func (n *Node) fetch(req FetchRequest) ([]*Claim, error) {
	ctx, cancel := context.WithTimeout(context.Background(), req.Wait+n.opts.ClaimTimeout)
	n.mu.Lock()
	n.fetchCancel = cancel
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.fetchCancel = nil
		n.mu.Unlock()
		cancel()
	}()
	if n.stopCtx.Err() != nil {
		return nil, nil
	}
	claims, err := n.backend.Fetch(ctx, req)
	if err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil // our own interruption
	}
	return claims, err
}

// dispatch takes the claim's slot and starts its worker. A claim for a queue this node does not
// listen to (an adapter bug) is released at once, never dropped.
func (n *Node) dispatch(c *Claim) {
	n.mu.Lock()
	l := n.listeners[c.Queue]
	halted := n.halted.Load()
	if l != nil && !halted {
		n.inflight[c.Queue]++
		n.workers.Add(1)
	}
	n.mu.Unlock()
	if halted {
		return
	}
	if l == nil {
		n.log.Error("txmq: backend returned a batch of a queue this node did not ask for; releasing it", "queue", c.Queue, "batch", c.ID)
		ctx, cancel := n.claimCtx()
		defer cancel()
		if err := n.backend.Retry(ctx, c, c.Body, 0); err != nil {
			n.log.Error("txmq: releasing a foreign batch failed; it returns after its lease", "queue", c.Queue, "batch", c.ID, "error", err)
		}
		return
	}
	go n.work(l, c)
}

// release frees a slot and wakes the driver; if the queue was full (left out of the fetch in
// progress), the waiting fetch is interrupted so the slot is used at once.
func (n *Node) release(queue string) {
	n.mu.Lock()
	n.inflight[queue]--
	if n.inflight[queue] <= 0 {
		delete(n.inflight, queue)
	}
	interrupt := !n.fetching[queue] && n.fetchCancel != nil
	cancel := n.fetchCancel
	n.mu.Unlock()
	n.signal()
	if interrupt {
		cancel()
	}
}
