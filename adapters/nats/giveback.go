package nats

import (
	"context"
	"strconv"
	"time"

	natsgo "github.com/nats-io/nats.go"
)

// giveBack hands stashed messages back to the server so another claim can take them at once,
// without counting their delivery (see requeue). A message whose lease has run out, or is
// within the margin of it, is left alone: the server may already have redelivered it, and it
// would accept this stale delivery's acknowledgement as the current one's. A keyed message is
// given back in place (see putBack), since a copy would go behind the later batches of its
// key; one whose lease is gone only has its delivery recorded as not a run (markNotRun).
func (be *Backend) giveBack(ss []*stashed) {
	for _, st := range ss {
		live := time.Now().Add(be.leaseMargin(st.ackWait)).Before(st.leaseUntil)
		switch {
		case st.key != "" && live:
			be.putBack(context.Background(), st, 0)
		case st.key != "":
			be.markNotRun(context.Background(), st)
		case live:
			be.requeue(st.l.q, st)
		}
	}
}

// requeue gives back a delivered message that never reached a listener, so that its delivery
// is not counted as a run: the message is stored again with the same headers and data (the
// batch id, the chunk references of a large body) plus Txmq-Base, the deliveries before it
// (this one excluded), and only then is the delivered message acknowledged. Claim.Deliveries
// of the copy is Txmq-Base + its own NumDelivered, so the count carries over to any node and
// survives crashes: it lives in the stored message. If the copy cannot be stored, the message
// is given back with a Nak (its delivery then counts) and the failure is logged; if the ack
// fails after the copy was stored, the batch may run twice (at-least-once), never be lost.
func (be *Backend) requeue(q *queueState, st *stashed) {
	ctx, cancel := context.WithTimeout(context.Background(), be.opts.Timeout)
	defer cancel()
	src := st.msg.Header
	hdr := natsgo.Header{}
	for _, k := range []string{hdrBatch, hdrChunks, hdrChunkID, hdrSize} {
		if v := src.Get(k); v != "" {
			hdr.Set(k, v)
		}
	}
	if base := st.deliveries - 1; base > 0 {
		hdr.Set(hdrBase, strconv.Itoa(base))
	}
	if err := be.publish(ctx, q, &natsgo.Msg{Subject: q.ready, Header: hdr, Data: st.msg.Data}); err != nil {
		be.opts.Logger.Warn("txmq/nats: could not store a batch given back without a run; giving it back with a Nak, which counts its delivery",
			"queue", q.name, "batch", st.id, "error", err)
		_ = be.nc.Publish(st.msg.Reply, nakBody(0))
		return
	}
	if _, err := be.nc.RequestWithContext(ctx, st.msg.Reply, ackAck); err != nil {
		be.opts.Logger.Warn("txmq/nats: a batch given back was stored again but its old message could not be acknowledged; it may run twice",
			"queue", q.name, "batch", st.id, "error", err)
	}
}

// sweepLaterLocked gives back, at at (when half their lease is gone), the messages of l's
// stash whose lease is half gone by then, if no Fetch has taken them (a node at capacity does
// not fetch the queue), rather than letting the lease run out, which the server would count
// as a delivery. A pull arms it once for all it delivers (they share one lease start), not
// once per message.
func (be *Backend) sweepLaterLocked(l *lane, at time.Time) {
	if be.noStashSweep {
		return
	}
	time.AfterFunc(time.Until(at), func() {
		be.mu.Lock()
		if be.closed {
			// Left to Close, which gives back what its pulls stash before it closes the
			// connection, well within the lease.
			be.mu.Unlock()
			return
		}
		now := time.Now()
		var release []*stashed
		keep := l.stash[:0]
		for _, st := range l.stash {
			if st.leaseUntil.Sub(now) <= st.ackWait/2 {
				release = append(release, st)
			} else {
				keep = append(keep, st)
			}
		}
		clear(l.stash[len(keep):])
		l.stash = keep
		be.mu.Unlock()
		be.giveBack(release)
	})
}
