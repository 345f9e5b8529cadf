package nats

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/core"
)

// minLongPoll is the shortest pull request worth waiting on; below it Fetch asks for what is
// available now (no_wait).
const minLongPoll = 10 * time.Millisecond

// maxPulls is how many pull requests a main lane may have outstanding. Each asks for free
// slots the others do not cover (never more in all), so at one message per batch the slots
// freed while a pull travels are asked for at once, rather than after it ends: one pull at a
// time left the server idle between pulls. A key partition has one pull at a time.
const maxPulls = 4

// maxStashRun is the most messages a pull stashes under one lock (see poll).
const maxStashRun = 32

// stashed is a message the server delivered to this Backend (its lease is running) that no
// Fetch has handed out yet.
type stashed struct {
	l          *lane
	msg        *natsgo.Msg
	id         string
	body       []byte
	chunkID    string
	deliveries int // Txmq-Base + NumDelivered: this delivery included
	ackWait    time.Duration
	leaseUntil time.Time
	conn       uint64 // the connection's reconnect count when the pull was sent (see connEpoch)
	key        string // the ordering key of a keyed batch (see ordering.go), else empty
	seq        uint64 // a keyed message's stream sequence
	notRuns    int    // a keyed message's deliveries that were not runs

	// The claim and its handle once handed out (see claim): kept here so that a delivery
	// costs one allocation, not three.
	claim  core.Claim
	handle handle
}

// slot is one lane of a requested queue in a Fetch: the main lane, and on an Ordered queue
// each key partition's lane too.
type slot struct {
	l       *lane
	cons    jetstream.Consumer
	ackWait time.Duration
	want    *int // claims of the queue still allowed, shared by its lanes (the request's Max caps them all)
	polled  bool // this Fetch started or joined a pull for the lane
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
	slots, err := be.setupQueues(ctx, req.Queues, lease)
	if err != nil {
		return nil, err
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
		// One error for this Fetch, and every lane's is taken with it: after an outage each
		// lane (an ordered queue has one per key partition) holds the error of its last
		// pull, and returning them one per Fetch made the driver back off once per lane,
		// up to its longest backoff each time, long after the connection was back. An
		// error of a pull sent before the connection was re-established is dropped.
		epoch := be.connEpoch()
		var pollErr error
		var release []*stashed
		for i := range slots {
			s := slots[(start+i)%len(slots)]
			var rel []*stashed
			claims, budget, rel = be.takeLocked(s, claims, budget)
			release = append(release, rel...)
			if s.l.pollErr != nil {
				if pollErr == nil && s.l.pollErrConn == epoch {
					pollErr = s.l.pollErr
				}
				s.l.pollErr = nil
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
			want := min(*s.want, budget)
			if want <= 0 {
				continue
			}
			if s.l.polling {
				// Join the outstanding pulls while this Fetch may wait; with no time left,
				// what they deliver goes to the next Fetch.
				waiting = waiting || remaining > 0
				s.polled = true
				// On a main lane, the free slots the outstanding pulls do not cover get a
				// pull of their own, up to maxPulls: the server delivers while the slots
				// freed since the last pull are asked for (see maxPulls).
				if s.l.part >= 0 || s.l.pulls >= maxPulls || want <= s.l.asked {
					continue
				}
				want -= s.l.asked
			} else if s.polled && remaining < minLongPoll {
				continue // this Fetch already asked once and its time is up
			}
			s.l.polling, s.polled, waiting = true, true, true
			s.l.pulls++
			s.l.asked += want
			expires := min(remaining, s.ackWait/4)
			if s.l.idle && remaining >= minLongPoll {
				// An idle queue's pull outlives this Fetch; the next Fetch calls join it.
				expires = min(max(remaining, be.opts.IdlePull), s.ackWait/4)
			}
			if s.l.part >= 0 {
				// Never no_wait on a key partition: the server keeps such a pull open while
				// the partition's batch is pending.
				expires = max(expires, minLongPoll)
			}
			be.polls.Add(1)
			go be.poll(s.l, s.cons, s.ackWait, want, expires)
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
	for len(s.l.stash) > 0 {
		if min(*s.want, budget) <= 0 {
			break
		}
		st := s.l.stash[0]
		s.l.stash[0] = nil
		s.l.stash = s.l.stash[1:]
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
		claims = append(claims, be.claimOf(st))
		*s.want--
		budget--
	}
	return claims, budget, release
}

// claimOf turns a stashed message into a claim holding a lease. The claim and its handle
// live in st (a stashed message is handed out once: takeLocked removes it from the stash).
func (be *Backend) claimOf(st *stashed) *core.Claim {
	q := st.l.q
	h := &st.handle
	h.be, h.q, h.l, h.msg, h.chunkID, h.ackWait, h.leaseUntil, h.conn = be, q, st.l, st.msg, st.chunkID, st.ackWait, st.leaseUntil, st.conn
	h.key, h.seq, h.notRuns = st.key, st.seq, st.notRuns
	st.claim = core.Claim{
		Queue:      q.name,
		ID:         st.id,
		Body:       st.body,
		Deliveries: st.deliveries,
		LeaseUntil: st.leaseUntil,
		Handle:     h,
	}
	return &st.claim
}

// poll runs one pull request for the lane (no_wait when expires is below minLongPoll) and
// stashes what it delivers.
func (be *Backend) poll(l *lane, cons jetstream.Consumer, ackWait time.Duration, batch int, expires time.Duration) {
	defer be.polls.Done()
	// The server starts a message's AckWait when it delivers it, after it received this
	// request: timing the lease from here is conservative.
	sent, conn := time.Now(), be.connEpoch()
	// The pull ends when the server ends it (or expires plus a second), and Close waits for
	// that: a pull cut short client-side drops what the server already sent it, and each such
	// message would come back after AckWait with a delivery counted that never ran.
	wait := expires
	if expires < minLongPoll {
		wait = 0 // no_wait
	}
	delivered := false
	got := 0 // messages delivered, counted off l.asked as they come (the rest at the end)
	p, err := be.startPull(cons, batch, wait)
	if err == nil {
		// A main lane stashes what has arrived in one go: the messages already waiting in
		// the inbox are read, up to maxStashRun, and stashed under one lock with at most one
		// wake-up, rather than a lock (and a wake-up of the Fetch) per message.
		run := 1
		if l.part < 0 {
			run = maxStashRun
		}
		var ready []*stashed
		for m := p.next(true); m != nil; m = p.next(true) {
			if !delivered {
				delivered = true
				be.mu.Lock()
				l.idle = false
				be.sweepLaterLocked(l, sent.Add(ackWait/2))
				be.mu.Unlock()
			}
			ready = ready[:0]
			n := 0 // messages read in this run, counted off l.asked
			for ; m != nil; m = p.next(false) {
				n++
				start := sent
				if l.part >= 0 {
					// A partition's next batch is delivered only once its pending one is
					// settled: when this Backend settled it, after the pull was sent, the
					// delivery came after that settle, and its lease is timed from it (see
					// lane.settledAt), not from the pull's start.
					be.mu.Lock()
					if l.settledAt.After(start) {
						start = l.settledAt
						be.sweepLaterLocked(l, start.Add(ackWait/2))
					}
					be.mu.Unlock()
				}
				if st := be.prepare(l, m, start, ackWait); st != nil {
					st.conn = conn
					ready = append(ready, st)
				}
				if n >= run {
					break
				}
			}
			got += n
			// Stashed even after Close: Close waits for this pull and gives back the stash.
			be.mu.Lock()
			l.asked -= n
			wasEmpty := len(l.stash) == 0
			l.stash = append(l.stash, ready...)
			if wasEmpty && len(ready) > 0 {
				// Only a stash that was empty can have a Fetch waiting for it: a Fetch waits
				// after finding each of its queues' stashes empty, and the append that
				// filled one woke it.
				be.broadcastLocked()
			}
			be.mu.Unlock()
			clear(ready)
		}
		err = p.err
	}
	if be.refusedPull(l, cons, err) {
		err = nil // sent again by the Fetch, if it still waits
	} else if errors.Is(err, natsgo.ErrNoResponders) || errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
		// The consumer is gone (deleted, or a key partition's in-memory consumer lost to a
		// server restart) or has had no reachable leader for Options.Timeout: the next Fetch
		// looks it up again, creating it if need be.
		l.forget(cons)
	}
	be.mu.Lock()
	l.pulls--
	l.asked -= max(batch-got, 0) // asked for, never delivered
	l.polling = l.pulls > 0
	l.idle = false
	if err != nil && !be.closed && !errors.Is(err, jetstream.ErrNoMessages) &&
		!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		l.pollErr, l.pollErrConn = wrap("fetch: pull of consumer "+l.consumer, l.q.name, err), conn
	} else if !delivered && expires >= minLongPoll {
		l.idle = true // a long pull found nothing: the next one may wait longer
	}
	be.broadcastLocked()
	be.mu.Unlock()
}

// prepare reads a delivered message: its batch id, deliveries (the message's NumDelivered
// plus its Txmq-Base header, see requeue) and (reassembled) body; nil
// means "not a claim". Due times are not checked here: the server fires a schedule by its own
// clock, the one the schedule was computed on (see serverNow), so comparing with this
// process's clock would only add skew.
func (be *Backend) prepare(l *lane, m *natsgo.Msg, sent time.Time, ackWait time.Duration) *stashed {
	q := l.q
	hdr := m.Header
	st := &stashed{l: l, msg: m, id: hdr.Get(hdrBatch), body: m.Data, ackWait: ackWait, leaseUntil: sent.Add(ackWait), deliveries: 1, key: hdr.Get(hdrKey)}
	meta, ok := parseAck(m.Reply)
	if ok {
		st.deliveries = int(meta.delivered)
	}
	if v := hdr.Get(hdrBase); v != "" {
		if base, err := strconv.Atoi(v); err == nil && base > 0 {
			st.deliveries += base
		}
	}
	if st.key != "" && ok && !be.keyed(context.Background(), st, meta) {
		return nil
	}
	if hdr.Get(hdrChunks) != "" {
		st.chunkID = hdr.Get(hdrChunkID)
		body, err := be.loadChunks(context.Background(), q, hdr)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			// The chunks are gone (purged by hand, or MaxAge): hand out an empty body, which
			// the engine drops as undecodable, rather than redeliver it forever.
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
