package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
)

// reclaimLimit bounds how many expired leases one claim script moves back, so one call on a
// queue whose node died holding thousands of batches stays short; the next calls move the rest.
const reclaimLimit = 1000

// maxSubscribeWait bounds how long a Fetch waits for the server to confirm a new wake-up
// subscription (normally one round trip) before claiming anyway; without the confirmation it
// still wakes on its timers.
const maxSubscribeWait = 250 * time.Millisecond

// minWait is the shortest timer a waiting Fetch arms, so it never spins.
const minWait = time.Millisecond

// Fetch claims due batches for the queues in req (normalised: see core.FetchRequest.Normalize),
// at most each queue's Free and req.Max in all, split between the queues up front by
// core.FetchRequest.Shares (the scripts run in one round trip, so the split cannot follow what
// each queue holds), with one claim script per queue pipelined in a single round trip. A Fetch
// that may wait (req.Wait > 0) skips the queues known to be idle (see claimDue), so an idle
// node sends no command per queue per poll. When nothing is due it blocks up to req.Wait
// (core.ClaimWait) on the queues' wake-up channels (see waker), waking within milliseconds of
// a publish, retry or freed exclusive lease on one of them, and at the earliest due time or
// lease end the scripts reported. Cancelling ctx ends the wait with an empty result and a nil
// error; the claim round trip itself runs detached from ctx (bounded by Options.CallTimeout),
// so claims Redis made are always returned, never stranded. An Exclusive queue yields none
// while any node holds a live lease on it.
func (be *Backend) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	if err := be.usable("fetch", ""); err != nil {
		return nil, err
	}
	req = req.Normalize()
	if len(req.Queues) == 0 {
		return []*core.Claim{}, nil
	}
	var (
		w        *waiter
		channels []string
	)
	if req.Wait > 0 && ctx.Err() == nil {
		// Listen before looking, so a publish between the claim and the wait wakes us.
		channels = make([]string, len(req.Queues))
		for i, qs := range req.Queues {
			channels[i] = be.keys.keys(qs.Queue).wake
		}
		w = be.wake.register(channels)
		defer be.wake.unregister(w, channels)
		be.wake.ensure(ctx, channels, min(req.Wait, maxSubscribeWait))
	}
	return core.ClaimWait(ctx, core.WaitOptions{
		Wait:     req.Wait,
		Wake:     func() <-chan struct{} { return w.ch },
		Done:     be.done,
		Closed:   func() error { return be.usable("fetch", "") },
		MinTimer: minWait,
	}, func() ([]*core.Claim, time.Duration, error) {
		claims, next, err := be.claimDue(ctx, req, channels)
		if err != nil && len(claims) > 0 {
			be.log.Warn("txmq redis: some queues could not be fetched; returning the claims made", "error", err)
			return claims, next, nil
		}
		return claims, next, err
	})
}

// claimDue runs the claim scripts of the queues of req that may have something claimable and
// returns as claim does. channels are the queues' wake channels, subscribed by the caller;
// nil (a Fetch that does not wait) claims every queue.
//
// A queue whose claim made no claim rests until the earliest due time or lease end its script
// reported, or for Options.IdleRecheck when nothing is pending (from three quarters of it on,
// the recheck rides along with any other queue's claim, so rechecks share round trips); until then, while its wake channel stays confirmed subscribed, no script runs for
// it. A wake-up on its channel (a publish to an empty queue, a retry, a freed exclusive
// lease, an expired lease found by a settle) ends the rest at once, and so does any break of
// the subscription, which also stops the skipping until the server confirms the channel
// again. Wake-ups are not durable, so the
// recheck bounds what a lost one can cost: the batch waits at most IdleRecheck, never forever.
//
// The rest is this process's knowledge, not a key on the server: no cross-slot index to keep
// in step with every publish (one more write on the hot path, and illegal in a script on
// Redis Cluster, where it would be a different slot), nothing that can go stale on the server.
// Each node still looks at each idle queue once per IdleRecheck: 1,000 idle queues cost
// 1,000/IdleRecheck claim scripts per second per node, whatever the poll wait.
func (be *Backend) claimDue(ctx context.Context, req core.FetchRequest, channels []string) ([]*core.Claim, time.Duration, error) {
	if channels == nil {
		claims, next, _, err := be.claim(ctx, req)
		return claims, next, err
	}
	now := time.Now()
	skip, gens := be.wake.plan(channels, now)
	sub := req
	sub.Queues = make([]core.QueueSlots, 0, len(req.Queues))
	idx := make([]int, 0, len(req.Queues))
	for i, qs := range req.Queues {
		if !skip[i] {
			sub.Queues = append(sub.Queues, qs)
			idx = append(idx, i)
		}
	}
	var (
		claims []*core.Claim
		err    error
	)
	if len(sub.Queues) > 0 {
		var looks []look
		claims, _, looks, err = be.claim(ctx, sub)
		for j, lk := range looks {
			ch := channels[idx[j]]
			if !lk.idle {
				be.wake.busy(ch)
				continue
			}
			// now is before the script's server time: the rest ends early rather than late.
			r := rest{from: now.Add(be.idleRecheck * 3 / 4), until: now.Add(be.idleRecheck)}
			if lk.next >= 0 && lk.next < be.idleRecheck {
				r.until = now.Add(lk.next)
				r.from = r.until
			}
			be.wake.rest(ch, gens[idx[j]], r)
		}
	}
	if len(claims) > 0 || err != nil {
		return claims, 0, err
	}
	return claims, be.wake.nextLook(channels, time.Now()), nil
}

// look is what one queue's claim script found: idle when it made no claim (and did not
// fail), with next as in the script's reply.
type look struct {
	idle bool
	next time.Duration
}

// claim runs the claim script of every requested queue with a share of req.Max (see
// core.FetchRequest.Shares; the extra claims go to a queue picked at random, so none starves)
// in one round trip and returns the claims, how long until one of the queues may have more
// without a wake-up (negative when none pending), what each queue's script found (a queue
// without a share is not looked at: not idle), and the first error. Claims of queues that
// succeeded are returned even when another queue failed.
func (be *Backend) claim(ctx context.Context, req core.FetchRequest) ([]*core.Claim, time.Duration, []look, error) {
	n := len(req.Queues)
	shares := req.Shares(mrand.IntN(max(n, 1)))
	run := make([]int, 0, n) // the queues with a share
	for i, sh := range shares {
		if sh > 0 {
			run = append(run, i)
		}
	}
	lease := req.Lease
	base := newTokenBase()
	leaseMs := max(int64(lease/time.Millisecond), 1)
	// Detached from ctx: once the scripts are sent, their claims must come back to us.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), be.callTimeout)
	defer cancel()
	start := time.Now()
	cmds, err := be.runScripts(cctx, claimScript, len(run), func(j int) ([]string, []any) {
		i := run[j]
		qs := req.Queues[i]
		excl := "0"
		if qs.Exclusive {
			excl = "1"
		}
		fair := "0"
		if qs.Fair {
			fair = "1"
		}
		return be.keys.keys(qs.Queue).script, []any{shares[i], leaseMs, base + strconv.Itoa(i), excl, reclaimLimit, max(qs.Limit, 0), fair, max(qs.KeyLimit, 0)}
	})
	leaseUntil := leaseEnd(start, leaseMs)
	claims := []*core.Claim{}
	next := time.Duration(-1)
	looks := make([]look, n)
	for i := range looks {
		looks[i].next = -1
	}
	var firstErr error
	for j, cmd := range cmds {
		i := run[j]
		qs := req.Queues[i]
		if cmd == nil || cmd.Err() != nil {
			if firstErr == nil {
				e := err
				if cmd != nil {
					e = cmd.Err()
				}
				firstErr = be.wrap(fmt.Sprintf("fetch from queue %q", qs.Queue), e)
			}
			continue
		}
		got, nx, perr := parseClaims(be, qs, cmd, leaseUntil)
		if len(claims) == 0 && len(got) > 0 {
			claims = got // most fetches claim from one queue: no copy
		} else if len(got) > 0 {
			claims = append(claims, got...)
		}
		if perr != nil {
			if firstErr == nil {
				firstErr = be.wrap(fmt.Sprintf("fetch from queue %q", qs.Queue), perr)
			}
			continue
		}
		looks[i] = look{idle: len(got) == 0, next: nx}
		if nx >= 0 && (next < 0 || nx < next) {
			next = nx
		}
	}
	if firstErr == nil && err != nil {
		firstErr = be.wrap("fetch", err)
	}
	return claims, next, looks, firstErr
}

// leaseEnd returns, on this machine's clock, the end of a lease of ms milliseconds that a
// script started at or after start: never later than the end the server enforces. The server
// stores its TIME truncated to the millisecond plus ms and ends the lease when its truncated
// TIME reaches that, so the lease ends at that millisecond; its TIME is read after start, so
// start truncated to the millisecond, plus ms, is not after it (start + lease was not: up to a
// millisecond later than the server's end, more for a claim's lease that is no whole number of
// milliseconds, which the claim script gets rounded down). As before, this machine's clock and
// the server's are taken to agree. Add keeps start's monotonic clock reading.
func leaseEnd(start time.Time, ms int64) time.Time {
	frac := time.Duration(start.UnixNano() % int64(time.Millisecond))
	return start.Add(time.Duration(ms)*time.Millisecond - frac)
}

// parseClaims reads one claim script reply: {now, next ms, id, body, deliveries, token, ...}.
func parseClaims(be *Backend, qs core.QueueSlots, cmd *goredis.Cmd, leaseUntil time.Time) ([]*core.Claim, time.Duration, error) {
	vals, err := cmd.Slice()
	if err != nil {
		return nil, -1, err
	}
	if len(vals) < 2 || (len(vals)-2)%4 != 0 {
		return nil, -1, fmt.Errorf("unexpected claim reply of %d elements", len(vals))
	}
	nextMs, ok := vals[1].(int64)
	if !ok {
		return nil, -1, fmt.Errorf("unexpected claim reply: next %T", vals[1])
	}
	next := time.Duration(-1)
	if nextMs >= 0 {
		next = time.Duration(nextMs) * time.Millisecond
	}
	var claims []*core.Claim
	if k := (len(vals) - 2) / 4; k > 0 {
		claims = make([]*core.Claim, 0, k)
	}
	for j := 2; j < len(vals); j += 4 {
		id, ok1 := vals[j].(string)
		body, ok2 := vals[j+1].(string)
		dlv, ok3 := vals[j+2].(int64)
		tok, ok4 := vals[j+3].(string)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return claims, next, fmt.Errorf("unexpected claim reply types %T %T %T %T", vals[j], vals[j+1], vals[j+2], vals[j+3])
		}
		ch := &claimHandle{
			c: core.Claim{Queue: qs.Queue, ID: id, Body: []byte(body), Deliveries: int(dlv), LeaseUntil: leaseUntil},
			h: handle{owner: be, token: tok, exclusive: qs.Exclusive || qs.Limit > 0 || qs.KeyLimit > 0, fair: qs.Fair, idArg: vals[j], tokenArg: vals[j+3]},
		}
		ch.c.Handle = &ch.h
		claims = append(claims, &ch.c)
	}
	return claims, next, nil
}

// claimHandle is a claim and its handle in one allocation (at one message per batch, a claim
// per message).
type claimHandle struct {
	c core.Claim
	h handle
}

// newTokenBase returns a random prefix for the lease tokens of one claim round trip; the
// token of every claim one queue's script makes is base and the queue's index: a script claims
// a batch at most once and the base never repeats, so no batch is given a token twice.
func newTokenBase() string {
	var b [9]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "."
}
