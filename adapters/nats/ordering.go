package nats

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/core"
)

// Ordered queues (core.KeyOrderer; "Ordering" in the package doc). A keyed batch is stored on
// one of the stream's key partition subjects, <prefix>.<q>.k.<n> with n = FNV-1a(key) mod the
// stream's partitions, in its place even when delayed. Each partition has its own durable
// pull consumer, "txmq-k<n>", with MaxAckPending 1, so the server hands out a partition's
// batches one at a time in stream order, and a batch stays the partition's only pending one
// until it is acked or terminated: a retry is a delayed Nak (in place), a lost lease is the
// server's own redelivery, a batch received before its delay is due is hidden with a delayed
// Nak, and a batch given back unrun is Nak'd. Deliveries that were not runs (a hide, a give
// back) are counted on <prefix>.<q>.n.<stream seq> (one rollup message), so that
// Claim.Deliveries counts runs only.

// metaPartitions is the stream metadata key that records the stream's key partitions.
const metaPartitions = "txmq_partitions"

var _ core.KeyOrderer = (*Backend)(nil)

// OrdersKeys reports that the Backend enforces per-key order (core.KeyOrderer): always nil.
// Keys share partitions: see "Ordering" in the package doc for what that costs.
func (be *Backend) OrdersKeys() error { return nil }

// partitionOf returns key's partition among n: FNV-1a (32 bits) of the key, modulo n.
func partitionOf(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(max(n, 1)))
}

// partitionsOf returns the key partitions recorded in a stream's metadata, 0 when none are.
func partitionsOf(info *jetstream.StreamInfo) int {
	if info == nil {
		return 0
	}
	n, err := strconv.Atoi(info.Config.Metadata[metaPartitions])
	if err != nil || n < 1 || n > maxPartitions {
		return 0
	}
	return n
}

// withPartitions returns s with its key partitions recorded: a stream created before this
// Backend recorded them (an older txmq) gets Options.Partitions in its metadata, so that every
// client from then on agrees on the stream's value whatever its own Options say.
func (be *Backend) withPartitions(ctx context.Context, s jetstream.Stream) (jetstream.Stream, error) {
	info := s.CachedInfo()
	if partitionsOf(info) > 0 {
		return s, nil
	}
	cfg := info.Config
	md := make(map[string]string, len(cfg.Metadata)+1)
	for k, v := range cfg.Metadata {
		md[k] = v
	}
	md[metaPartitions] = strconv.Itoa(be.opts.Partitions)
	cfg.Metadata = md
	return be.js.UpdateStream(ctx, cfg)
}

// setPartitionsLocked makes the queue's n partition lanes (guarded by Backend.mu).
func (q *queueState) setPartitionsLocked(n int) {
	q.partitions = n
	q.parts = make([]*lane, n)
	for i := range q.parts {
		q.parts[i] = &lane{q: q, consumer: consumerName + "-k" + strconv.Itoa(i), filter: q.partSubject(i), part: i}
	}
}

// lanes returns the main lane and the partition lanes (guarded by Backend.mu).
func (q *queueState) lanes() []*lane { return append([]*lane{q.lane}, q.parts...) }

// partSubject is key partition i's subject.
func (q *queueState) partSubject(i int) string { return q.prefix + "k." + strconv.Itoa(i) }

// keyedSubject is where a batch with key is stored: its partition's subject, or the ready
// subject of an Exclusive queue, whose single in-flight batch is already a total order.
func (q *queueState) keyedSubject(key string, exclusive bool) string {
	if exclusive {
		return q.ready
	}
	return q.partSubject(partitionOf(key, q.partitions))
}

// notRunSubject holds how many deliveries of the keyed message at stream sequence seq were
// not runs.
func (q *queueState) notRunSubject(seq uint64) string {
	return q.prefix + "n." + strconv.FormatUint(seq, 10)
}

// keyed completes a delivered keyed message: its deliveries less those that were not runs,
// and, when it is not due yet on the server's clock (its delay runs from its store time), it
// hides it in place until it is, returning false (not a claim).
func (be *Backend) keyed(ctx context.Context, st *stashed, meta ackMeta) bool {
	q := st.l.q
	st.seq = meta.streamSeq
	if meta.delivered > 1 {
		n, err := be.notRuns(ctx, q, st.seq)
		if err != nil {
			be.opts.Logger.Warn("txmq/nats: could not read how many deliveries of an ordered batch were not runs; counting them all",
				"queue", q.name, "batch", st.id, "error", err)
		}
		st.notRuns = n
		st.deliveries = max(st.deliveries-n, 1)
	}
	v := st.msg.Header.Get(hdrDelay)
	if v == "" {
		return true
	}
	delay, err := time.ParseDuration(v)
	if err != nil || delay <= 0 {
		return true
	}
	now, err := be.serverNowLow(ctx, q)
	if err != nil {
		// Cannot tell whether it is due: leave it to its lease (its key waits meanwhile).
		be.opts.Logger.Warn("txmq/nats: could not read the server's clock for a delayed ordered batch; it comes back after its lease",
			"queue", q.name, "batch", st.id, "error", err)
		return false
	}
	left := meta.timestamp.Add(delay).Sub(now)
	if left <= 0 {
		return true
	}
	be.putBack(ctx, st, left)
	return false
}

// putBack gives a keyed message back in place without counting the delivery as a run: the
// not-run count is raised first (see markNotRun), then the message is Nak'd, to come back
// after delay (0: at once), still the first pending one of its partition. If the Nak fails
// the message comes back after its AckWait.
func (be *Backend) putBack(ctx context.Context, st *stashed, delay time.Duration) {
	be.markNotRun(ctx, st)
	be.settling(st.l)
	cctx, cancel := be.callCtx(ctx)
	defer cancel()
	if _, err := be.nc.RequestWithContext(cctx, st.msg.Reply, nakBody(delay)); err != nil {
		be.opts.Logger.Warn("txmq/nats: could not give back an ordered batch; it comes back after its lease",
			"queue", st.l.q.name, "batch", st.id, "error", err)
	}
}

// markNotRun records that this delivery of a keyed message was not a run (it was hidden,
// given back, or its lease ran out in the stash): the message's not-run count becomes
// st.notRuns+1, one rollup message. If that fails the delivery counts as a run (logged). Two
// holders racing (a lease ran out here while the server redelivered) can only undercount, so
// a run is never hidden from the engine's budget.
func (be *Backend) markNotRun(ctx context.Context, st *stashed) {
	q := st.l.q
	cctx, cancel := be.callCtx(ctx)
	defer cancel()
	msg := &natsgo.Msg{Subject: q.notRunSubject(st.seq), Header: natsgo.Header{}, Data: []byte(strconv.Itoa(st.notRuns + 1))}
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	if _, err := be.js.PublishMsg(cctx, msg, jetstream.WithExpectStream(q.streamName)); err != nil {
		be.opts.Logger.Warn("txmq/nats: could not record a delivery of an ordered batch that did not run; it counts as a run",
			"queue", q.name, "batch", st.id, "error", err)
	}
}

// notRuns reads how many deliveries of the keyed message at seq were not runs (0: none).
func (be *Backend) notRuns(ctx context.Context, q *queueState, seq uint64) (int, error) {
	cctx, cancel := be.callCtx(ctx)
	defer cancel()
	m, err := q.stream.GetLastMsgForSubject(cctx, q.notRunSubject(seq))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(m.Data))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad not-run count %q on %s", m.Data, q.notRunSubject(seq))
	}
	return n, nil
}

// purgeNotRuns removes a settled keyed message's not-run count, best effort (logged).
func (be *Backend) purgeNotRuns(q *queueState, seq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), be.opts.Timeout)
	defer cancel()
	if err := q.stream.Purge(ctx, jetstream.WithPurgeSubject(q.notRunSubject(seq))); err != nil {
		be.opts.Logger.Warn("txmq/nats: could not remove the not-run count of an ordered batch; it stays in the stream until MaxAge or a manual purge",
			"queue", q.name, "subject", q.notRunSubject(seq), "error", err)
	}
}

// nakBody is a Nak that redelivers after delay (at once when it is not positive).
func nakBody(delay time.Duration) []byte {
	if delay <= 0 {
		return []byte("-NAK")
	}
	return fmt.Appendf(nil, `-NAK {"delay": %d}`, delay.Nanoseconds())
}
