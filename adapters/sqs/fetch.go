package sqs

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
)

// pollKey names one SQS queue a client polls: a txmq queue and the kind of its SQS queue.
type pollKey struct {
	queue string
	k     kind
}

// poller is the state of one polled SQS queue in this client: at most one ReceiveMessage is
// outstanding per queue, whatever the number of Fetch calls, so an idle queue costs one
// request per long-poll wait and no goroutine when nobody fetches it.
type poller struct {
	busy bool          // a receive is outstanding
	done chan struct{} // closed when it ends
	hot  bool          // the last receive returned messages: poll short next time
	last time.Time     // when the last receive started
	wait int32         // the long-poll wait of the last receive, in seconds (0: a short poll)
	err  error         // the last receive's error, until a Fetch reports it
}

// pending is a received batch not yet handed out: a claim whose Fetch had already returned
// (it was interrupted, or another queue answered first), kept for the next Fetch.
type pending struct {
	claim *core.Claim
	h     *handle
	got   time.Time
}

const (
	// maxReceive is SQS's MaxNumberOfMessages cap.
	maxReceive = 10
	// maxWait is SQS's longest long poll.
	maxWait = 20 * time.Second
)

// Fetch claims due batches for the queues in req (normalised: see core.FetchRequest.Normalize),
// at most each queue's free slots and req.Max in all (and at most 10 per queue per call,
// SQS's receive cap). It first hands out batches this client
// already received; then it polls every requested queue concurrently: a short poll for a queue
// that had work last time, else a long poll of req.Wait rounded up to whole seconds (1 to 20)
// or Options.IdleWait, whichever is longer (the poll outlives a shorter Fetch).
// It returns as soon as any queue yields claims; polls still outstanding keep running and
// what they receive goes to the next Fetch. Cancelling ctx returns at once with the claims
// already received, never stranding them.
func (be *Backend) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	if err := be.usable("fetch", ""); err != nil {
		return nil, err
	}
	req = req.Normalize()
	lease := req.Lease
	for _, qs := range req.Queues {
		if err := be.checkName("fetch", qs.Queue); err != nil {
			return nil, err
		}
	}
	// Queues are looked up (and created on first use) by their own polls, concurrently: a
	// Fetch over many new queues does not wait for one round trip after another before its
	// first poll starts, and a queue whose lookup fails does not hold up the others (its
	// error comes back through the poll, like a failed receive).
	var waitSecs int32
	var deadline <-chan time.Time
	if req.Wait > 0 {
		waitSecs = min(max(seconds(req.Wait, maxWait), 1), int32(maxWait/time.Second))
		t := time.NewTimer(req.Wait)
		defer t.Stop()
		deadline = t.C
	}
	var mine []chan struct{}
	for round := 0; ; round++ {
		be.mu.Lock()
		if be.closed {
			be.mu.Unlock()
			return nil, be.usable("fetch", "")
		}
		claims, rel := be.takeLocked(req)
		ev := be.ev
		var perr error
		if len(claims) == 0 {
			perr = be.pollErrLocked(req)
		}
		if len(claims) == 0 && perr == nil && (req.Wait > 0 || round == 0) {
			mine = append(mine, be.startPollsLocked(req, lease, waitSecs)...)
		}
		be.mu.Unlock()
		be.releaseLater(rel)
		switch {
		case len(claims) > 0:
			return be.freshen(ctx, claims, lease), nil
		case perr != nil:
			return []*core.Claim{}, perr
		case req.Wait <= 0 && round > 0:
			return []*core.Claim{}, nil
		case req.Wait <= 0:
			// Short polls only: wait for the ones this call started, then take once more.
			for _, d := range mine {
				select {
				case <-d:
				case <-ctx.Done():
				}
			}
			continue
		}
		select {
		case <-ev:
		case <-deadline:
			return be.takeNow(ctx, req, lease), nil
		case <-ctx.Done():
			return be.takeNow(ctx, req, lease), nil
		}
	}
}

// takeNow hands out what was received by now, at the end of a Fetch.
func (be *Backend) takeNow(ctx context.Context, req core.FetchRequest, lease time.Duration) []*core.Claim {
	be.mu.Lock()
	claims, rel := be.takeLocked(req)
	be.mu.Unlock()
	be.releaseLater(rel)
	if len(claims) == 0 {
		return []*core.Claim{}
	}
	if ctx.Err() != nil {
		ctx = context.Background()
	}
	return be.freshen(ctx, claims, lease)
}

// takeLocked takes received batches for (normalised) req from the stash: at most each queue's
// free slots and req.Max in all. Entries whose
// lease ran out are forgotten (SQS shows them again); entries nobody took for half a lease
// are returned for release.
func (be *Backend) takeLocked(req core.FetchRequest) (claims []*core.Claim, rel []*pending) {
	now := time.Now()
	budget := req.Max
	for _, qs := range req.Queues {
		list := be.stash[qs.Queue]
		if len(list) == 0 {
			continue
		}
		want := min(qs.Free, budget)
		keep := list[:0]
		for _, p := range list {
			switch {
			case p.h.k != mainKind(qs.Exclusive, qs.Ordered):
				keep = append(keep, p)
			case !now.Before(p.claim.LeaseUntil):
				// Lost before anyone took it: SQS hands it out again.
			case want > 0:
				claims = append(claims, p.claim)
				want--
				budget--
			default:
				keep = append(keep, p)
			}
		}
		be.stash[qs.Queue] = keep
	}
	for q, list := range be.stash {
		keep := list[:0]
		for _, p := range list {
			if now.Sub(p.got) > p.h.lease/2 {
				rel = append(rel, p)
			} else {
				keep = append(keep, p)
			}
		}
		if len(keep) == 0 {
			delete(be.stash, q)
		} else {
			be.stash[q] = keep
		}
	}
	return claims, rel
}

// pollErrLocked returns (and clears) the error of a finished poll of one of req's queues.
func (be *Backend) pollErrLocked(req core.FetchRequest) error {
	for _, qs := range req.Queues {
		for _, k := range []kind{mainKind(qs.Exclusive, qs.Ordered), kindHold} {
			if p := be.pollers[pollKey{qs.Queue, k}]; p != nil && !p.busy && p.err != nil {
				err := p.err
				p.err = nil
				return err
			}
		}
	}
	return nil
}

// startPollsLocked starts a receive on every requested queue that has none outstanding, and
// returns the done channels of those it started. Main queues are polled short when they had
// work last time, else long (see idleWait). A holding queue is polled like its main queue for an
// Exclusive queue (its short delays live there), and with a short poll every third of
// MaxNativeDelay for a standard one (only batches due beyond the native cap live there).
func (be *Backend) startPollsLocked(req core.FetchRequest, lease time.Duration, waitSecs int32) []chan struct{} {
	var started []chan struct{}
	vis := visibility(lease)
	for _, qs := range req.Queues {
		n := min(qs.Free, maxReceive) // normalised: at least 1, and 1 for an Exclusive queue
		if qs.Ordered {
			// One message a receive: SQS may return several of one message group at once,
			// which would run a key's batches side by side (see "Ordering" in the doc).
			n = 1
		}
		main := be.pollerLocked(pollKey{qs.Queue, mainKind(qs.Exclusive, qs.Ordered)})
		if !main.busy {
			wait := be.idleWait(waitSecs)
			if main.hot {
				wait = 0
			}
			started = append(started, be.startPollLocked(pollKey{qs.Queue, mainKind(qs.Exclusive, qs.Ordered)}, main, qs.Exclusive, int32(n), vis, lease, wait))
		}
		hold := be.pollerLocked(pollKey{qs.Queue, kindHold})
		if hold.busy {
			continue
		}
		switch {
		case qs.Exclusive:
			wait := be.idleWait(waitSecs)
			if hold.hot {
				wait = 0
			}
			started = append(started, be.startPollLocked(pollKey{qs.Queue, kindHold}, hold, true, maxReceive, holdVisibility, lease, wait))
		case time.Since(hold.last) >= be.opts.MaxNativeDelay/3:
			started = append(started, be.startPollLocked(pollKey{qs.Queue, kindHold}, hold, false, maxReceive, holdVisibility, lease, 0))
		}
	}
	return started
}

// idleWait is the long-poll wait of an idle queue's receive in a Fetch whose own wait is
// waitSecs: Options.IdleWait or waitSecs, whichever is longer, and 0 (a short poll) for a
// Fetch that does not wait.
func (be *Backend) idleWait(waitSecs int32) int32 {
	if waitSecs <= 0 {
		return 0
	}
	return max(waitSecs, int32(be.opts.IdleWait/time.Second))
}

func (be *Backend) pollerLocked(k pollKey) *poller {
	p := be.pollers[k]
	if p == nil {
		p = &poller{}
		be.pollers[k] = p
	}
	return p
}

// freshen extends claims with less than half their lease left (they waited in the stash), so
// the engine gets them with time to run; a claim whose handle SQS refuses is dropped (it is
// visible again and will be received anew).
func (be *Backend) freshen(ctx context.Context, claims []*core.Claim, lease time.Duration) []*core.Claim {
	out := claims[:0]
	for _, c := range claims {
		if time.Until(c.LeaseUntil) >= lease/2 {
			out = append(out, c)
			continue
		}
		h := c.Handle.(*handle)
		start := time.Now()
		vis := visibility(lease)
		cctx, cancel := context.WithTimeout(ctx, be.opts.RequestTimeout)
		err := be.changeVisibility(cctx, h.url, h.receipt, vis)
		cancel()
		if err != nil && classify(err) == classStaleHandle {
			continue
		}
		if err == nil {
			c.LeaseUntil = leaseEnd(start, vis)
		}
		out = append(out, c)
	}
	return out
}
