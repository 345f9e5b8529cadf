package sqs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core/envelope"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/txmq/txmq/core"
)

// Backend is a core.Backend on Amazon SQS. Each Backend is one client (one node's view); any
// number of Backends, in any number of processes, share batches through the SQS queues
// named by their Prefix. It is safe for concurrent use. The zero value is not usable: call
// New.
type Backend struct {
	opts   Options
	client *awssqs.Client
	log    *slog.Logger

	urlMu      sync.Mutex
	urls       map[string]string     // SQS queue name -> URL
	urlFlights map[string]*urlFlight // lookups in progress, by SQS queue name

	mu      sync.Mutex
	pollers map[pollKey]*poller
	stash   map[string][]*pending // received, not yet handed out, by txmq queue
	ev      chan struct{}         // closed (and replaced) whenever a poll ends
	closed  bool

	bg       context.Context // background polls; cancelled by Close once they ended
	bgCancel context.CancelFunc
	polls    sync.WaitGroup

	requests [opCount]atomic.Int64
}

var _ core.Backend = (*Backend)(nil)

// New returns a Backend configured by opts (nil means every default: the AWS config chain,
// prefix "txmq-"). It makes no request to SQS: queues are created on first use, or up front
// with EnsureQueues.
func New(ctx context.Context, opts *Options) (*Backend, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	client, err := buildClient(ctx, &o)
	if err != nil {
		return nil, err
	}
	bg, cancel := context.WithCancel(context.Background())
	return &Backend{
		opts:       o,
		client:     client,
		log:        o.Logger,
		urls:       map[string]string{},
		urlFlights: map[string]*urlFlight{},
		pollers:    map[pollKey]*poller{},
		stash:      map[string][]*pending{},
		ev:         make(chan struct{}),
		bg:         bg,
		bgCancel:   cancel,
	}, nil
}

// PollWaitHint tells the nodes to long-poll for 20 s (SQS's maximum) when their PollWait is
// not set: an idle queue then costs 180 requests an hour per node instead of 3,600, and work
// is still picked up at once, since a long poll returns as soon as a message arrives.
func (be *Backend) PollWaitHint() time.Duration { return 20 * time.Second }

// Client returns the SQS client the Backend uses.
func (be *Backend) Client() *awssqs.Client { return be.client }

// Publish stores one batch in SQS: in the queue's main queue, with DelaySeconds when it is
// due within MaxNativeDelay, else in its holding queue (see the package doc). A body too large
// for one message is compressed, then put in the Overflow store, or, without one, split by
// messages into batches that fit (core/envelope.Split, which takes and returns whole batches:
// the adapter never decodes the envelope).
func (be *Backend) Publish(ctx context.Context, b core.OutgoingBatch) error {
	if err := be.usable("publish", b.Queue); err != nil {
		return err
	}
	if err := be.checkName("publish batch "+b.ID, b.Queue); err != nil {
		return err
	}
	w, err := be.encode(ctx, b.Queue, b.ID, b.Body)
	if errors.Is(err, errTooLarge) {
		// No overflow store: split the batch by messages until each part fits (a batch is
		// only a unit of delivery, so its messages may travel apart).
		parts, serr := envelope.Split(b)
		if serr != nil {
			return fmt.Errorf("%w (and it cannot be split: %v)", err, serr)
		}
		for _, part := range parts {
			if err := be.Publish(ctx, part); err != nil {
				return err
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	w.key = b.Key
	dedup := b.ID
	if b.PublishID != "" {
		dedup = b.PublishID // a deliberate re-publish (a replay): not a repeat of the first
	}
	if dedup == "" {
		dedup = core.NewID()
	}
	if err := be.route(ctx, b.Queue, b.Exclusive, w, b.DelayFrom(time.Now()), dedup); err != nil {
		be.forgetOverflow(w)
		return err
	}
	return nil
}

// forgetOverflow deletes w's overflow body after its message could not be sent.
func (be *Backend) forgetOverflow(w wire) {
	if w.overflow == "" || be.opts.Overflow == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), be.opts.RequestTimeout)
	defer cancel()
	if err := be.opts.Overflow.Delete(ctx, w.overflow); err != nil {
		be.log.Warn("sqs: deleting an unused overflow body failed; it is garbage now", "key", w.overflow, "error", err)
	}
}

// Depths reports, per queue, SQS's approximate counts: visible messages of the main queue as
// ready, its in-flight messages (claimed, or waiting out an in-place retry) as in flight, and
// its delayed messages plus everything in the holding queue as delayed. A queue never used
// reports zeros (and is not created).
func (be *Backend) Depths(ctx context.Context, queues []string) (map[string]core.Depth, error) {
	if err := be.usable("depths", ""); err != nil {
		return nil, err
	}
	for _, q := range queues {
		if err := be.checkName("depths", q); err != nil {
			return nil, err
		}
	}
	// Every queue has up to three SQS queues; ask them all at once, at most 16 requests in
	// flight, so a status check over many queues takes one round trip or so, not one each.
	kinds := []kind{kindStandard, kindFIFO, kindHold}
	type result struct{ vis, inflight, delayed int64 }
	results := make([]result, len(queues)*len(kinds))
	errs := make([]error, len(results))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range results {
		q, k := queues[i/len(kinds)], kinds[i%len(kinds)]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var r result
			r.vis, r.inflight, r.delayed, errs[i] = be.queueCounts(ctx, q, k)
			results[i] = r
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := make(map[string]core.Depth, len(queues))
	for i, r := range results {
		q, k := queues[i/len(kinds)], kinds[i%len(kinds)]
		d := out[q]
		if k == kindHold {
			d.Delayed += r.vis + r.inflight + r.delayed
		} else {
			d.Ready += r.vis
			d.InFlight += r.inflight
			d.Delayed += r.delayed
		}
		out[q] = d
	}
	return out, nil
}

// queueCounts returns the approximate visible, not visible and delayed counts of one SQS
// queue, zeros when it does not exist.
func (be *Backend) queueCounts(ctx context.Context, queue string, k kind) (int64, int64, int64, error) {
	u, err := be.url(ctx, queue, k, false)
	if err != nil || u == "" {
		return 0, 0, 0, err
	}
	be.count(opAttributes)
	res, err := be.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(u), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	}})
	if isNoQueue(err) {
		be.forgetURL(queue, k)
		return 0, 0, 0, nil
	}
	if err != nil {
		return 0, 0, 0, wrap("depths", queue, err)
	}
	n := func(a types.QueueAttributeName) int64 {
		v, _ := strconv.ParseInt(res.Attributes[string(a)], 10, 64)
		return v
	}
	return n(types.QueueAttributeNameApproximateNumberOfMessages),
		n(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible),
		n(types.QueueAttributeNameApproximateNumberOfMessagesDelayed), nil
}

// Close stops this client's polling, ends the long polls in flight with wake messages and
// waits for them to end (it never cuts a receive: one cut short may have made SQS hide
// messages it never delivered, which would come back after the visibility timeout with their
// receive count one higher, a run spent that never ran; see wakePolls), gives back the
// batches it received but did not hand out, without counting the receive (see release), and
// makes every later call fail with an error wrapping core.ErrClosed. Batches stay in SQS.
// Closing twice is a no-op.
func (be *Backend) Close() error {
	be.mu.Lock()
	if be.closed {
		be.mu.Unlock()
		return nil
	}
	be.closed = true
	be.signalLocked()
	left := be.takeStashLocked()
	be.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), be.opts.RequestTimeout)
	defer cancel()
	for _, p := range left {
		be.release(ctx, p) // now, while their leases hold; receives ending later release their own
	}
	be.wakePolls()
	be.polls.Wait()
	be.bgCancel()
	return nil
}

// takeStashLocked empties the stash and returns what it held.
func (be *Backend) takeStashLocked() []*pending {
	var out []*pending
	for q, ps := range be.stash {
		out = append(out, ps...)
		delete(be.stash, q)
	}
	return out
}

// usable returns the error for a call made after Close.
func (be *Backend) usable(op, queue string) error {
	be.mu.Lock()
	closed := be.closed
	be.mu.Unlock()
	if !closed {
		return nil
	}
	where := op
	if queue != "" {
		where = fmt.Sprintf("%s (queue %q)", op, queue)
	}
	return fmt.Errorf("sqs: %s: the backend was closed; open a new one with sqs.New: %w", where, core.ErrClosed)
}

// SQS operations counted by Requests.
const (
	opReceive = iota
	opSend
	opDelete
	opVisibility
	opAttributes
	opCount
)

var opNames = [opCount]string{"ReceiveMessage", "SendMessage", "DeleteMessage", "ChangeMessageVisibility", "GetQueueAttributes"}

func (be *Backend) count(op int) { be.requests[op].Add(1) }

// Requests reports how many SQS requests of each billed kind this Backend has made
// (ReceiveMessage, SendMessage, DeleteMessage, ChangeMessageVisibility, GetQueueAttributes),
// SDK retries not included; queue lookups and creations are not counted.
func (be *Backend) Requests() map[string]int64 {
	out := make(map[string]int64, opCount)
	for i := range be.requests {
		out[opNames[i]] = be.requests[i].Load()
	}
	return out
}

// signalLocked wakes every waiting Fetch.
func (be *Backend) signalLocked() {
	close(be.ev)
	be.ev = make(chan struct{})
}

// visibility is the lease as SQS visibility seconds: rounded up, at least 1, at most 12 h.
func visibility(lease time.Duration) int32 {
	return max(seconds(lease, MaxVisibility), 1)
}

// maxLeaseMargin is the most leaseEnd keeps between a claim's LeaseUntil and the server's
// visibility deadline.
const maxLeaseMargin = 200 * time.Millisecond

// leaseEnd is a claim's LeaseUntil for a visibility timeout of vis seconds counted from
// from: a margin (a tenth of the timeout, at most maxLeaseMargin) before the server's own
// deadline. SQS counts visibility on its clock and its granularity (a server was seen to
// release a message 53 ms before the timeout measured from the request's start), and a
// client that settles or counts an Exclusive queue's batch as held until the last
// millisecond would act on a message another node may have received already.
func leaseEnd(from time.Time, vis int32) time.Time {
	d := time.Duration(vis) * time.Second
	return from.Add(d - min(d/10, maxLeaseMargin))
}
