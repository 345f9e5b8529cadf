package nats

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/core"
)

// minLongPoll is the shortest pull request worth waiting on; below it Fetch asks for what is
// available now (no_wait).
const minLongPoll = 10 * time.Millisecond

// stashed is a message the server delivered to this Backend (its lease is running) that no
// Fetch has handed out yet.
type stashed struct {
	q          *queueState
	msg        jetstream.Msg
	id         string
	body       []byte
	chunkID    string
	deliveries int // Txmq-Base + NumDelivered: this delivery included
	ackWait    time.Duration
	leaseUntil time.Time
	conn       uint64 // the connection's reconnect count when the pull was sent (see connEpoch)
}

// slot is one requested queue in a Fetch.
type slot struct {
	q       *queueState
	cons    jetstream.Consumer
	ackWait time.Duration
	want    int  // claims of the queue still allowed (the request's Max caps them all)
	polled  bool // this Fetch started or joined a pull for the queue
}

// Fetch claims due batches for the queues in req (normalised: see core.FetchRequest.Normalize),
// at most each queue's Free and req.Max in all (an Exclusive queue at most one, and the
// server's MaxAckPending 1 keeps it at one cluster-wide).
//
// Each queue has at most one outstanding pull request per Backend. A pull asks for the
// queue's free slots and waits up to req.Wait (capped at a quarter of the lease, so that a
// late message still has most of its lease), or Options.IdlePull with the same cap when the
// queue's last pull delivered nothing, so an idle queue costs one pull per IdlePull, not one
// per Fetch; messages stream into a per-queue stash and the
// Fetch returns as soon as it can hand out at least one claim. A pull that outlives the Fetch
// that started it (the Fetch returned early with another queue's claims, or ctx was
// cancelled) keeps filling the stash, and the next Fetch hands those claims out first, so a
// claim the server made is never stranded. A stashed claim whose lease is half gone is not
// handed out: it is given back (see requeue: its delivery is not counted) while its lease
// holds, by the next Fetch or by a timer if no Fetch takes the queue by then, and otherwise
// left to the server's redelivery (an ack from a stale delivery would be applied to the
// current one).
func (be *Backend) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	claims := []*core.Claim{}
	req = req.Normalize()
	if len(req.Queues) == 0 {
		return claims, nil
	}
	if err := be.usable(ctx, "fetch", ""); err != nil {
		return nil, err
	}
	lease := req.Lease
	deadline := time.Now().Add(req.Wait)
	budget := req.Max
	ready, err := be.setupQueues(ctx, req.Queues, lease)
	if err != nil {
		return nil, err
	}
	slots := make([]*slot, 0, len(req.Queues))
	for i, qs := range req.Queues {
		slots = append(slots, &slot{q: ready[i].q, cons: ready[i].cons, ackWait: ready[i].ackWait, want: qs.Free})
	}
	start := rand.IntN(len(slots))
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		be.mu.Lock()
		if be.closed {
			be.mu.Unlock()
			if len(claims) > 0 {
				return claims, nil
			}
			return nil, errClosed("fetch", "")
		}
		wake := be.wake
		var pollErr error
		var release []*stashed
		for i := range slots {
			s := slots[(start+i)%len(slots)]
			var rel []*stashed
			claims, budget, rel = be.takeLocked(s, claims, budget)
			release = append(release, rel...)
			if s.q.pollErr != nil && pollErr == nil {
				pollErr = s.q.pollErr
				s.q.pollErr = nil
			}
		}
		if len(claims) > 0 || pollErr != nil {
			be.mu.Unlock()
			be.giveBack(release)
			if len(claims) > 0 {
				return claims, nil
			}
			return nil, pollErr
		}
		remaining := time.Until(deadline)
		waiting := false // a pull this Fetch may still get something from
		for _, s := range slots {
			want := min(s.want, budget)
			if want <= 0 {
				continue
			}
			if s.q.polling {
				// Join the outstanding pull while this Fetch may wait; with no time left,
				// what it delivers goes to the next Fetch.
				waiting = waiting || remaining > 0
				s.polled = true
				continue
			}
			if s.polled && remaining < minLongPoll {
				continue // this Fetch already asked once and its time is up
			}
			s.q.polling, s.polled, waiting = true, true, true
			expires := min(remaining, s.ackWait/4)
			if s.q.idle && remaining >= minLongPoll {
				// An idle queue's pull outlives this Fetch; the next Fetch calls join it.
				expires = min(max(remaining, be.opts.IdlePull), s.ackWait/4)
			}
			be.polls.Add(1)
			go be.poll(s.q, s.cons, s.ackWait, want, expires)
		}
		be.mu.Unlock()
		be.giveBack(release)
		if !waiting || ctx.Err() != nil {
			return claims, nil
		}
		if remaining <= 0 {
			remaining = be.opts.Timeout // only a no_wait pull is outstanding: it answers at once
		}
		if timer == nil {
			timer = time.NewTimer(remaining)
		} else {
			timer.Reset(remaining)
		}
		select {
		case <-wake:
		case <-timer.C:
			deadline = time.Now() // nothing more to wait for
		case <-ctx.Done():
		case <-be.done:
		}
		if ctx.Err() != nil {
			// Hand out what already arrived; a pull still outstanding fills the stash for
			// the next Fetch.
			be.mu.Lock()
			var release []*stashed
			for _, s := range slots {
				var rel []*stashed
				claims, budget, rel = be.takeLocked(s, claims, budget)
				release = append(release, rel...)
			}
			be.mu.Unlock()
			be.giveBack(release)
			return claims, nil
		}
	}
}

// takeLocked moves up to the slot's allowance of stashed messages into claims, and returns
// the stashed messages whose lease is too far gone to hand out (to be given back).
func (be *Backend) takeLocked(s *slot, claims []*core.Claim, budget int) ([]*core.Claim, int, []*stashed) {
	var release []*stashed
	now := time.Now()
	epoch := be.connEpoch()
	for len(s.q.stash) > 0 {
		if min(s.want, budget) <= 0 {
			break
		}
		st := s.q.stash[0]
		s.q.stash[0] = nil
		s.q.stash = s.q.stash[1:]
		if st.conn != epoch {
			// Delivered before the connection was re-established: the server may have
			// restarted and handed it out again (see connEpoch). Neither run nor acked: it
			// comes back after its AckWait.
			continue
		}
		if st.leaseUntil.Sub(now) < st.ackWait/2 {
			release = append(release, st)
			continue
		}
		claims = append(claims, be.claim(s.q, st))
		s.want--
		budget--
	}
	return claims, budget, release
}

// claim turns a stashed message into a claim holding a lease.
func (be *Backend) claim(q *queueState, st *stashed) *core.Claim {
	h := &handle{be: be, q: q, msg: st.msg, chunkID: st.chunkID, ackWait: st.ackWait, leaseUntil: st.leaseUntil, conn: st.conn}
	return &core.Claim{
		Queue:      q.name,
		ID:         st.id,
		Body:       st.body,
		Deliveries: st.deliveries,
		LeaseUntil: st.leaseUntil,
		Handle:     h,
	}
}

// poll runs one pull request for the queue (no_wait when expires is below minLongPoll) and
// stashes what it delivers.
func (be *Backend) poll(q *queueState, cons jetstream.Consumer, ackWait time.Duration, batch int, expires time.Duration) {
	defer be.polls.Done()
	// The server starts a message's AckWait when it delivers it, after it received this
	// request: timing the lease from here is conservative.
	sent, conn := time.Now(), be.connEpoch()
	var (
		mb  jetstream.MessageBatch
		err error
	)
	if expires < minLongPoll {
		mb, err = cons.FetchNoWait(batch)
	} else {
		// The pull ends when the server expires it, and Close waits for that: a pull cut
		// short client-side (FetchContext) drops what the server already sent it, and each
		// such message would come back after AckWait with a delivery counted that never ran.
		// FetchMaxWait waits for the server's expiry plus 1s.
		mb, err = cons.Fetch(batch, jetstream.FetchMaxWait(expires))
	}
	delivered := false
	if err == nil {
		for m := range mb.Messages() {
			if !delivered {
				delivered = true
				be.mu.Lock()
				q.idle = false
				be.sweepLaterLocked(q, sent.Add(ackWait/2))
				be.mu.Unlock()
			}
			st := be.prepare(q, m, sent, ackWait)
			if st == nil {
				continue
			}
			st.conn = conn
			// Stashed even after Close: Close waits for this pull and gives back the stash.
			be.mu.Lock()
			q.stash = append(q.stash, st)
			if len(q.stash) == 1 {
				// Only a stash that was empty can have a Fetch waiting for it: a Fetch waits
				// after finding each of its queues' stashes empty, and the append that
				// filled one woke it.
				be.broadcastLocked()
			}
			be.mu.Unlock()
		}
		err = mb.Error()
	}
	if be.refusedPull(q, err) {
		err = nil // sent again by the Fetch, if it still waits
	}
	be.mu.Lock()
	q.polling = false
	q.idle = false
	if err != nil && !be.closed && !errors.Is(err, jetstream.ErrNoMessages) &&
		!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		q.pollErr = wrap("fetch: pull", q.name, err)
	} else if !delivered && expires >= minLongPoll {
		q.idle = true // a long pull found nothing: the next one may wait longer
	}
	be.broadcastLocked()
	be.mu.Unlock()
}

// prepare reads a delivered message: its batch id, deliveries (the message's NumDelivered
// plus its Txmq-Base header, see requeue) and (reassembled) body; nil
// means "not a claim". Due times are not checked here: the server fires a schedule by its own
// clock, the one the schedule was computed on (see serverNow), so comparing with this
// process's clock would only add skew.
func (be *Backend) prepare(q *queueState, m jetstream.Msg, sent time.Time, ackWait time.Duration) *stashed {
	hdr := m.Headers()
	st := &stashed{q: q, msg: m, id: hdr.Get(hdrBatch), body: m.Data(), ackWait: ackWait, leaseUntil: sent.Add(ackWait), deliveries: 1}
	if meta, err := m.Metadata(); err == nil {
		st.deliveries = int(meta.NumDelivered)
	}
	if base, err := strconv.Atoi(hdr.Get(hdrBase)); err == nil && base > 0 {
		st.deliveries += base
	}
	if hdr.Get(hdrChunks) != "" {
		st.chunkID = hdr.Get(hdrChunkID)
		body, err := be.loadChunks(context.Background(), q, hdr)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			// The chunks are gone (purged by hand, or MaxAge): hand out an empty body, which
			// core drops as undecodable, rather than redeliver it forever.
			st.body = nil
		case err != nil:
			// Could not read the chunks now (an outage): leave the message to its lease.
			be.opts.Logger.Warn("txmq/nats: could not read the chunks of a large batch; it comes back after its lease", "queue", q.name, "batch", st.id, "error", err)
			return nil
		default:
			st.body = body
		}
	}
	return st
}

func (be *Backend) broadcastLocked() {
	close(be.wake)
	be.wake = make(chan struct{})
}
