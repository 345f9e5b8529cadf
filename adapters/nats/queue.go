package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/txmq/txmq/core"
)

// Headers the Backend sets on stored messages.
const (
	hdrBatch   = "Txmq-Batch"    // batch id
	hdrChunks  = "Txmq-Chunks"   // number of chunks of a chunked body
	hdrChunkID = "Txmq-Chunk-Id" // the chunks' subject token
	hdrSize    = "Txmq-Size"     // total body size of a chunked body
	hdrBase    = "Txmq-Base"     // deliveries of the batch before this message existed

	hdrKey   = "Txmq-Key"   // ordering key of a keyed batch (see ordering.go)
	hdrDelay = "Txmq-Delay" // a keyed batch's delay from its store time (a Go duration)

	hdrSchedule       = "Nats-Schedule"
	hdrScheduleTarget = "Nats-Schedule-Target"

	consumerName = "txmq"
)

// queueState is one queue's stream and its lanes in one Backend.
type queueState struct {
	*lane      // the main lane: consumer "txmq" on the ready subject
	name       string
	streamName string
	ready      string // subject of due batches, the main consumer's filter
	prefix     string // "<prefix>.<queue>."

	setup      ctxMutex // serialises stream creation (Depths waits for it, see depth)
	stream     jetstream.Stream
	partitions int           // key partitions, from the stream's metadata (see ordering.go)
	parts      []*lane       // one lane per key partition, made with the stream
	clock      serverClock   // the clock of the server that fires the stream's schedules
	dupWindow  time.Duration // the stream's duplicate window as this Backend last set or saw it
}

// lane is one durable pull consumer of a queue's stream and this Backend's fetch state for
// it: the main lane (consumer "txmq", the ready subject) or a key partition's (see
// ordering.go).
type lane struct {
	q        *queueState
	consumer string // durable name
	filter   string // the consumer's filter subject
	part     int    // the key partition, -1 for the main lane

	refusedSince atomic.Int64 // UnixNano of the first of the lane's pulls refused in a row (see refusedPull)

	consMu    ctxMutex // serialises consumer creation (Depths waits for it, see depth)
	cons      jetstream.Consumer
	exclusive bool          // as applied to cons
	ackWait   time.Duration // cons's AckWait

	// Guarded by Backend.mu.
	polling bool       // a pull request is outstanding (pulls > 0)
	pulls   int        // pull requests outstanding (more than one on a main lane: see maxPulls)
	asked   int        // messages the outstanding pulls asked for and have not delivered yet
	idle    bool       // the last pull ended having delivered nothing (see Options.IdlePull)
	stash   []*stashed // claims pulled but not yet handed out
	pollErr error      // the last poll's error, for the next Fetch
	// pollErrConn is the connection epoch (see connEpoch) the failed poll was sent on: an
	// error from before the connection was re-established says nothing about it now.
	pollErrConn uint64
	// settledAt is when this Backend last sent a settle (or a give-back) of a key partition's
	// pending batch, taken before sending it. The partition has one batch pending at a time,
	// so a batch this lane receives was delivered after the settle that freed it: its lease
	// is timed from max(the pull's start, settledAt), conservative either way, so that one
	// pull can carry a partition's batches one after the other.
	settledAt time.Time
}

func (q *queueState) schedSubject() string { return q.prefix + "s." + nuid.Next() }
func (q *queueState) schedFilter() string  { return q.prefix + "s.>" }
func (q *queueState) chunkSubject(id string, i int) string {
	return q.prefix + "c." + id + "." + strconv.Itoa(i)
}
func (q *queueState) chunkFilter(id string) string { return q.prefix + "c." + id + ".>" }

// queueStateLocked returns the queue's state, creating it (without server calls) on first use.
func (be *Backend) queueStateLocked(name string) *queueState {
	q, ok := be.queues[name]
	if !ok {
		q = &queueState{
			name:       name,
			streamName: be.opts.Prefix + "_" + name,
			ready:      be.opts.Prefix + "." + name + ".r",
			prefix:     be.opts.Prefix + "." + name + ".",
		}
		q.lane = &lane{q: q, consumer: consumerName, filter: q.ready, part: -1}
		be.queues[name] = q
	}
	return q
}

// queue returns the queue's state with its stream created (or found) on the server.
//
// The stream is created first, and looked up only when it exists with another config: a
// create of a stream that exists with the same config (or is being created with it) answers
// with the stream, once it has a leader. A lookup first, as before, made the common first use
// two calls, and in a cluster its stream info request is one nats-server serves only when no
// other API request is queued ("infos are deprioritized"), and whose "not found" only the
// meta leader sends: while the other nodes' creations kept the meta leader busy it went
// unanswered past Options.Timeout, and a publish without an outbox was lost to it.
func (be *Backend) queue(ctx context.Context, op, name string) (*queueState, error) {
	if err := be.usable(ctx, op, name); err != nil {
		return nil, err
	}
	be.mu.Lock()
	q := be.queueStateLocked(name)
	be.mu.Unlock()
	q.setup.Lock()
	defer q.setup.Unlock()
	if q.stream != nil {
		return q, nil
	}
	// Creating the stream is idempotent (a create with the same config answers with the
	// existing stream), so it is sent again on any outage within the caller's deadline, or
	// two call timeouts: a busy cluster's meta leader can answer after one (see busy.go).
	var s jetstream.Stream
	var sent, recv time.Time
	var what string
	err := be.retryBusy(ctx, busyDeadline(ctx, 2*be.opts.Timeout), isUnavailable, func() error {
		cctx, cancel := be.callCtx(ctx)
		defer cancel()
		var err error
		sent = time.Now()
		what = "stream " + q.streamName
		s, err = be.js.CreateStream(cctx, be.streamConfig(q))
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			sent = time.Now()
			s, err = be.js.Stream(cctx, q.streamName)
		}
		if err != nil {
			return err
		}
		recv = time.Now()
		what = "recording the key partitions of stream " + q.streamName
		s, err = be.withPartitions(cctx, s)
		return err
	})
	if err != nil {
		return nil, wrap(op+": "+what, name, err)
	}
	q.stream = s
	info := s.CachedInfo()
	be.mu.Lock()
	q.setPartitionsLocked(partitionsOf(info))
	be.mu.Unlock()
	q.clock.seed(info.TimeStamp, sent, recv) // the first delayed publish needs no extra round trip
	return q, nil
}

// streamConfig is the stream of one queue: work-queue retention (a batch is removed when its
// claim is acknowledged), message schedules for delays, direct gets for chunks.
func (be *Backend) streamConfig(q *queueState) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              q.streamName,
		Description:       "txmq queue " + q.name,
		Subjects:          []string{q.prefix + ">"},
		Retention:         jetstream.WorkQueuePolicy,
		Storage:           be.opts.storage(),
		Replicas:          be.opts.Replicas,
		MaxAge:            be.opts.MaxAge,
		Discard:           jetstream.DiscardOld,
		AllowMsgSchedules: true,
		AllowRollup:       true,
		AllowDirect:       true,
		Metadata:          map[string]string{metaPartitions: strconv.Itoa(be.opts.Partitions)},
	}
}

// cached returns the lane's consumer when it was set up as wanted (see consumer).
func (l *lane) cached(exclusive bool, wantWait time.Duration) (jetstream.Consumer, time.Duration, bool) {
	l.consMu.Lock()
	defer l.consMu.Unlock()
	if l.cons != nil && l.exclusive == exclusive && l.ackWait >= wantWait {
		return l.cons, l.ackWait, true
	}
	return nil, 0, false
}

// forget drops the lane's consumer if it is still cons, so the next Fetch sets it up again.
func (l *lane) forget(cons jetstream.Consumer) {
	l.consMu.Lock()
	defer l.consMu.Unlock()
	if l.cons == cons {
		l.cons = nil
	}
}

// consumer returns the lane's durable pull consumer, created on first use with AckWait = the
// larger of Options.AckWait and the request's lease, and MaxAckPending 1 for an Exclusive
// queue's main lane and for every key partition's lane. An existing consumer whose
// MaxAckPending does not match, or whose AckWait is shorter than this client wants, is updated.
//
// AckWait is only ever raised, never lowered: every client times its claims with the AckWait
// it last saw, so a lower value set by one client would let the server redeliver the batches
// another still holds (and extends on its own schedule). A client whose lease is longer than
// the AckWait raises it, so that its claims hold at least its lease; one whose lease is
// shorter keeps the longer AckWait (its node extends more often than it needs to).
func (be *Backend) consumer(ctx context.Context, l *lane, exclusive bool, lease time.Duration) (jetstream.Consumer, time.Duration, error) {
	l.consMu.Lock()
	defer l.consMu.Unlock()
	q := l.q
	wantWait := max(be.opts.AckWait, lease) // lease > 0: Fetch normalised its request
	if l.cons != nil && l.exclusive == exclusive && l.ackWait >= wantWait {
		return l.cons, l.ackWait, nil
	}
	wantPending := be.opts.MaxAckPending
	if exclusive || l.part >= 0 {
		wantPending = 1
	}
	desc := "txmq workers of queue " + q.name
	if l.part >= 0 {
		desc += " (key partition " + strconv.Itoa(l.part) + ")"
	}
	cctx, cancel := be.callCtx(ctx)
	defer cancel()
	cfg := jetstream.ConsumerConfig{
		Durable:       l.consumer,
		Description:   desc,
		FilterSubject: l.filter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       wantWait,
		MaxDeliver:    -1, // the engine owns the retry budget
		MaxAckPending: wantPending,
		Replicas:      be.opts.Replicas,
		MemoryStorage: be.opts.MemoryStorage || l.part >= 0,
	}
	// Created in one call, which answers with the consumer when it exists with the same
	// config; one that exists with another config (a raised AckWait) is looked up. As with
	// streams (see queue), a lookup first would be an info request, which a busy cluster
	// serves last.
	c, err := q.stream.CreateConsumer(cctx, cfg)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		c, err = q.stream.Consumer(cctx, l.consumer)
	}
	if err != nil {
		return nil, 0, wrap("fetch: consumer "+l.consumer+" of stream "+q.streamName, q.name, err)
	}
	have := c.CachedInfo().Config
	if have.MaxAckPending != wantPending || have.AckWait < wantWait {
		upd := have
		upd.MaxAckPending = wantPending
		upd.AckWait = max(have.AckWait, wantWait)
		if c, err = q.stream.UpdateConsumer(cctx, upd); err != nil {
			return nil, 0, wrap("fetch: updating consumer "+l.consumer+" of stream "+q.streamName, q.name, err)
		}
		have = c.CachedInfo().Config
	}
	l.cons, l.exclusive, l.ackWait = c, exclusive, have.AckWait
	return c, have.AckWait, nil
}

// store publishes one batch body: chunks first when it is too large, then the message on the
// ready subject, or as a message schedule targeting the ready subject when delay is positive.
// A keyed batch (key not empty, see ordering.go) goes to its key's partition subject (the ready
// subject on an Exclusive queue) at once, in its place, with its delay in a header.
func (be *Backend) store(ctx context.Context, q *queueState, id string, body []byte, delay time.Duration, key string, exclusive bool) error {
	return be.storeDedup(ctx, q, id, body, delay, key, exclusive, "")
}

// storeDedup is store with a message id (Nats-Msg-Id) when dedupID is not empty: a message id
// the stream already holds within its duplicate window is refused as a *core.DuplicateError
// and nothing stays stored.
func (be *Backend) storeDedup(ctx context.Context, q *queueState, id string, body []byte, delay time.Duration, key string, exclusive bool, dedupID string) error {
	hdr := natsgo.Header{}
	if dedupID != "" {
		hdr.Set(natsgo.MsgIdHdr, dedupID)
	}
	var at time.Time
	if delay > 0 && key == "" {
		now, err := be.serverNow(ctx, q)
		if err != nil {
			return wrap("publish batch "+id+": reading the server's clock for its schedule", q.name, err)
		}
		at = now.Add(delay)
	}
	hdr.Set(hdrBatch, id)
	data := body
	var chunkID string
	if len(body) > be.chunkSize {
		chunkID = nuid.Next()
		n := (len(body) + be.chunkSize - 1) / be.chunkSize
		for i := range n {
			part := body[i*be.chunkSize : min((i+1)*be.chunkSize, len(body))]
			if err := be.publish(ctx, q, &natsgo.Msg{Subject: q.chunkSubject(chunkID, i), Data: part}); err != nil {
				be.purgeChunks(q, chunkID)
				return wrap(fmt.Sprintf("publish batch %s: chunk %d of %d", id, i+1, n), q.name, err)
			}
		}
		hdr.Set(hdrChunks, strconv.Itoa(n))
		hdr.Set(hdrChunkID, chunkID)
		hdr.Set(hdrSize, strconv.Itoa(len(body)))
		data = nil
	}
	msg := &natsgo.Msg{Subject: q.ready, Header: hdr, Data: data}
	if key != "" {
		msg.Subject = q.keyedSubject(key, exclusive)
		hdr.Set(hdrKey, key)
		if delay > 0 {
			hdr.Set(hdrDelay, delay.String())
		}
	}
	if !at.IsZero() {
		msg.Subject = q.schedSubject()
		hdr.Set(hdrSchedule, "@at "+at.UTC().Format(time.RFC3339Nano))
		hdr.Set(hdrScheduleTarget, q.ready)
	}
	ack, err := be.publishAck(ctx, q, msg)
	if err != nil {
		if chunkID != "" {
			be.purgeChunks(q, chunkID)
		}
		return wrap("publish batch "+id, q.name, err)
	}
	if dedupID != "" && ack.Duplicate {
		if chunkID != "" {
			be.purgeChunks(q, chunkID)
		}
		return &core.DuplicateError{Queue: q.name, IDs: []string{dedupID}}
	}
	return nil
}

func (be *Backend) publish(ctx context.Context, q *queueState, msg *natsgo.Msg) error {
	_, err := be.publishAck(ctx, q, msg)
	return err
}

// publishAck stores msg in q's stream and returns the server's ack. A publish the server
// certainly did not store (notStored: no stream leader for a moment, JetStream briefly
// unavailable) is sent again within the call's Timeout (see busy.go).
func (be *Backend) publishAck(ctx context.Context, q *queueState, msg *natsgo.Msg) (*jetstream.PubAck, error) {
	cctx, cancel := be.callCtx(ctx)
	defer cancel()
	var ack *jetstream.PubAck
	err := be.retryBusy(cctx, busyDeadline(cctx, be.opts.Timeout), notStored, func() error {
		var err error
		// nats.go itself sends a request that found no responder twice more; retryBusy
		// goes on from there with its own backoff.
		ack, err = be.js.PublishMsg(cctx, msg, jetstream.WithExpectStream(q.streamName), jetstream.WithRetryWait(busyWaitMin))
		return err
	})
	return ack, err
}

// purgeChunks removes a chunked body's chunks, best effort: a failure leaves orphan chunks
// (logged), never a lost batch.
func (be *Backend) purgeChunks(q *queueState, chunkID string) {
	ctx, cancel := context.WithTimeout(context.Background(), be.opts.Timeout)
	defer cancel()
	if err := q.stream.Purge(ctx, jetstream.WithPurgeSubject(q.chunkFilter(chunkID))); err != nil {
		be.opts.Logger.Warn("txmq/nats: could not remove the chunks of a large batch; they stay in the stream until MaxAge or a manual purge",
			"queue", q.name, "subject", q.chunkFilter(chunkID), "error", err)
	}
}

// loadChunks reassembles a chunked body.
func (be *Backend) loadChunks(ctx context.Context, q *queueState, hdr natsgo.Header) ([]byte, error) {
	n, err := strconv.Atoi(hdr.Get(hdrChunks))
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("bad %s header %q", hdrChunks, hdr.Get(hdrChunks))
	}
	size, _ := strconv.Atoi(hdr.Get(hdrSize))
	id := hdr.Get(hdrChunkID)
	body := make([]byte, 0, max(size, 0))
	for i := range n {
		cctx, cancel := be.callCtx(ctx)
		m, err := q.stream.GetLastMsgForSubject(cctx, q.chunkSubject(id, i))
		cancel()
		if err != nil {
			return nil, err
		}
		body = append(body, m.Data...)
	}
	return body, nil
}
