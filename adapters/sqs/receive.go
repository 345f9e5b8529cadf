package sqs

import (
	"context"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/txmq/txmq/core"
)

const (
	// holdVisibility hides a holding-queue message from other movers while this one moves it.
	holdVisibility = 30
	// leaseSlack is how much earlier than the response a long-polled message may have been
	// taken by SQS: the visibility timeout is counted from there, so LeaseUntil is never
	// later than SQS's own deadline by more than the network delay.
	leaseSlack = 200 * time.Millisecond
)

// startPollLocked starts one background receive on the queue k and returns its done channel.
// The receive runs on the Backend's own context, never on a Fetch's, and Close ends it with a
// wake message (see wakePolls) rather than cutting it, so neither a Fetch that returns early
// nor Close cuts a request in which SQS may already have hidden messages: they reach the
// stash, then the next Fetch or Close's release.
func (be *Backend) startPollLocked(k pollKey, p *poller, exclusive bool, n, vis int32, lease time.Duration, wait int32) chan struct{} {
	p.busy, p.done, p.last, p.wait, p.err = true, make(chan struct{}), time.Now(), wait, nil
	done := p.done
	be.polls.Add(1)
	go func() {
		defer be.polls.Done()
		ctx, cancel := context.WithTimeout(be.bg, time.Duration(wait)*time.Second+be.opts.RequestTimeout)
		defer cancel()
		var (
			got     []*pending
			touched int
			err     error
		)
		if k.k == kindHold {
			touched, err = be.moveHeld(ctx, k.queue, exclusive, wait)
		} else {
			got, touched, err = be.receive(ctx, k, exclusive, n, vis, lease, wait)
		}
		be.mu.Lock()
		p.busy, p.hot = false, touched > 0
		if err != nil && be.bg.Err() == nil {
			p.err = err
		}
		closed := be.closed
		if len(got) > 0 && !closed {
			be.stash[k.queue] = append(be.stash[k.queue], got...)
			for _, g := range got {
				be.sweepLaterLocked(g)
			}
		}
		close(done)
		be.signalLocked()
		be.mu.Unlock()
		if closed && len(got) > 0 {
			// Close is waiting for this receive: give back what it got now.
			rctx, rcancel := context.WithTimeout(context.Background(), be.opts.RequestTimeout)
			defer rcancel()
			for _, g := range got {
				be.release(rctx, g)
			}
		}
	}()
	return done
}

// receive polls a main queue once and turns what it gets into pending claims. A message not
// yet due (what is left of its delay, judged on SQS's clock by wireOf, is positive) is parked
// again, not handed out; a wake message (see wakePolls) is deleted. It returns the claims and
// how many batches SQS returned.
func (be *Backend) receive(ctx context.Context, k pollKey, exclusive bool, n, vis int32, lease time.Duration, wait int32) ([]*pending, int, error) {
	u, err := be.url(ctx, k.queue, k.k, true)
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	be.count(opReceive)
	out, err := be.client.ReceiveMessage(ctx, receiveInput(u, n, vis, wait))
	if err != nil {
		if isNoQueue(err) {
			be.forgetURL(k.queue, k.k)
		}
		return nil, 0, wrap("fetch", k.queue, err)
	}
	now := time.Now()
	leaseUntil := leaseEnd(maxTime(start, now.Add(-leaseSlack)), vis)
	var got []*pending
	batches := 0
	for _, m := range out.Messages {
		if isWake(m) {
			be.dropWake(ctx, k.queue, u, m)
			continue
		}
		batches++
		w, count := wireOf(m)
		receipt := aws.ToString(m.ReceiptHandle)
		early := 0
		switch {
		case w.key != "":
			// A keyed batch keeps its place in its message group: not yet due, it is hidden
			// (in flight, so the rest of its key waits) until it is, never moved.
			var left time.Duration
			if early, left = keyedDelay(w.delay, count); left > 0 {
				be.hide(ctx, k.queue, u, receipt, w, left)
				continue
			}
		case w.delay > 0:
			be.park(ctx, k.queue, exclusive, u, receipt, w)
			continue
		}
		body, err := be.decode(ctx, w)
		if err != nil {
			be.log.Warn("sqs: reading a batch's overflow body failed; it comes back after its visibility timeout", "queue", k.queue, "batch", w.id, "error", err)
			continue
		}
		h := &handle{queue: k.queue, k: k.k, exclusive: exclusive, url: u, receipt: receipt, w: w, count: count, lease: lease}
		got = append(got, &pending{h: h, got: now, claim: &core.Claim{
			Queue: k.queue, ID: w.id, Body: body, Deliveries: w.base + count - early, LeaseUntil: leaseUntil, Handle: h,
		}})
	}
	return got, batches, nil
}

// park moves a received, not yet due message back to where its due time says (see route)
// and deletes it here. Its receive was not a run: the moved copy keeps the same base, and
// this SQS message's own receive count is dropped with it.
func (be *Backend) park(ctx context.Context, queue string, exclusive bool, url, receipt string, w wire) {
	if err := be.route(ctx, queue, exclusive, w, w.delay, ""); err != nil {
		be.log.Warn("sqs: parking a batch that is not due failed; it comes back after its visibility timeout", "queue", queue, "batch", w.id, "error", err)
		return
	}
	if err := be.deleteMsg(ctx, url, receipt); err != nil {
		be.log.Warn("sqs: deleting a parked batch's old message failed; it may be delivered twice", "queue", queue, "batch", w.id, "error", err)
	}
}

// keyedDelay judges the delay of a keyed batch (which waits in its FIFO queue, hidden, not
// moved) at its count-th receive: rem is what was left of its delay at its first receive
// (wireOf, on SQS's clock). Each early receive hides it for what is left, at most
// MaxVisibility, so the first `early` receives are not runs; left is what is still to wait
// at this receive (0: due, and Deliveries is its receives minus the early ones).
func keyedDelay(rem time.Duration, count int) (early int, left time.Duration) {
	if rem <= 0 {
		return 0, 0
	}
	early = int((rem + MaxVisibility - 1) / MaxVisibility)
	if count > early {
		return early, 0
	}
	return early, rem - time.Duration(count-1)*MaxVisibility
}

// hide keeps a received keyed batch that is not due in flight for left (at most
// MaxVisibility), so it stays the head of its key and the later batches of the key wait.
func (be *Backend) hide(ctx context.Context, queue, url, receipt string, w wire, left time.Duration) {
	if err := be.changeVisibility(ctx, url, receipt, seconds(min(left, MaxVisibility), MaxVisibility)); err != nil {
		be.log.Warn("sqs: hiding a keyed batch that is not due failed; it comes back after its visibility timeout, possibly before its due time", "queue", queue, "batch", w.id, "error", err)
	}
}

// moveHeld polls queue's holding queue once and moves each message to where its due time
// now says: the main queue (with DelaySeconds for the rest) once it is within reach, else back
// into the holding queue for another round; a wake message is deleted. It returns how many
// batches it saw.
func (be *Backend) moveHeld(ctx context.Context, queue string, exclusive bool, wait int32) (int, error) {
	u, err := be.url(ctx, queue, kindHold, true)
	if err != nil {
		return 0, err
	}
	be.count(opReceive)
	out, err := be.client.ReceiveMessage(ctx, receiveInput(u, maxReceive, holdVisibility, wait))
	if err != nil {
		if isNoQueue(err) {
			be.forgetURL(queue, kindHold)
		}
		return 0, wrap("fetch (holding queue)", queue, err)
	}
	batches := 0
	for _, m := range out.Messages {
		if isWake(m) {
			be.dropWake(ctx, queue, u, m)
			continue
		}
		batches++
		w, _ := wireOf(m)
		be.park(ctx, queue, exclusive, u, aws.ToString(m.ReceiptHandle), w)
	}
	return batches, nil
}

// releaseLater releases, in the background, batches received but not handed out in time.
func (be *Backend) releaseLater(ps []*pending) {
	if len(ps) == 0 {
		return
	}
	be.polls.Add(1)
	go func() {
		defer be.polls.Done()
		ctx, cancel := context.WithTimeout(context.Background(), be.opts.RequestTimeout)
		defer cancel()
		for _, p := range ps {
			be.release(ctx, p)
		}
	}()
}

// release gives back a batch this client received but never handed out. It re-sends it with
// its base raised by the receives so far minus this one, and deletes the received message, so
// the receive that was not a run is not counted; if that fails it makes the message visible
// at once (its receive count then includes this receive).
func (be *Backend) release(ctx context.Context, p *pending) {
	h := p.h
	w := h.w
	if w.key != "" {
		// A keyed batch must keep its place at the head of its key: made visible again, its
		// receive counts as a delivery (see "Ordering" in the package doc).
		if err := be.changeVisibility(ctx, h.url, h.receipt, 0); err != nil {
			be.log.Warn("sqs: releasing a keyed batch this client received but did not hand out failed; it comes back after its visibility timeout", "queue", h.queue, "batch", w.id, "error", err)
		}
		return
	}
	w.base += h.count - 1
	if err := be.route(ctx, h.queue, h.exclusive, w, 0, ""); err == nil {
		if err := be.deleteMsg(ctx, h.url, h.receipt); err != nil {
			be.log.Warn("sqs: deleting a released batch's old message failed; it may be delivered twice", "queue", h.queue, "batch", w.id, "error", err)
		}
		return
	}
	if err := be.changeVisibility(ctx, h.url, h.receipt, 0); err != nil {
		be.log.Warn("sqs: releasing a batch this client received but did not hand out failed; it comes back after its visibility timeout", "queue", h.queue, "batch", w.id, "error", err)
	}
}

// sweepLaterLocked releases p when half its lease is gone if no Fetch has taken it by then (a
// node at capacity does not fetch the queue), rather than letting its visibility timeout run
// out, which SQS would count as a receive.
func (be *Backend) sweepLaterLocked(p *pending) {
	time.AfterFunc(time.Until(p.got.Add(p.h.lease/2)), func() {
		be.mu.Lock()
		list := be.stash[p.h.queue]
		i := slices.Index(list, p)
		if be.closed || i < 0 {
			be.mu.Unlock()
			return // handed out, released by a Fetch, or left to Close
		}
		if list = slices.Delete(list, i, i+1); len(list) == 0 {
			delete(be.stash, p.h.queue)
		} else {
			be.stash[p.h.queue] = list
		}
		be.polls.Add(1) // under mu: Close, once it has set closed, waits for this release
		be.mu.Unlock()
		defer be.polls.Done()
		ctx, cancel := context.WithTimeout(context.Background(), be.opts.RequestTimeout)
		defer cancel()
		be.release(ctx, p)
	})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// legacyAttributeNames is receiveAttributes in the deprecated AttributeNames form, which older

// receiveInput is a ReceiveMessage request for up to n messages of the queue at url, hidden
// for vis seconds, waiting up to wait seconds, with every attribute a claim needs.
func receiveInput(url string, n, vis, wait int32) *awssqs.ReceiveMessageInput {
	return &awssqs.ReceiveMessageInput{
		QueueUrl:            aws.String(url),
		MaxNumberOfMessages: n,
		VisibilityTimeout:   vis,
		WaitTimeSeconds:     wait,
		//lint:ignore SA1019 older SQS endpoints and emulators read only AttributeNames
		AttributeNames:              legacyAttributeNames(),
		MessageSystemAttributeNames: receiveAttributes,
		MessageAttributeNames:       []string{"All"},
	}
}

// SQS endpoints and emulators read instead.
func legacyAttributeNames() []types.QueueAttributeName {
	out := make([]types.QueueAttributeName, len(receiveAttributes))
	for i, a := range receiveAttributes {
		out[i] = types.QueueAttributeName(a)
	}
	return out
}
