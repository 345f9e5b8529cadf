package parity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// Poison and size limits: a publish over the size limit is refused at the call (nothing of it
// published, in or out of a transaction), and a batch the backend refuses permanently (an
// error wrapping core.ErrRejected) is dead-lettered once, by the node's flush or by the outbox,
// and never blocks the batches behind it. The permanent refusal is injected by a wrapper around
// the adapter's client, so the property holds the policy of the engine (txmq's flush and
// worker, not package core) and of the outbox to the same contract on every adapter; each
// adapter's own tests check that its real refusals (Redis proto-max-bulk-len, SQS message
// size, NATS max_payload, PostgreSQL value limits) classify as core.ErrRejected and never as
// core.ErrBackendUnavailable.

func init() {
	register("poison",
		property{name: "oversize_publish_refused_at_call", run: oversizeRefusedAtCall},
		property{name: "oversize_tx_publish_refused_at_call", run: oversizeTxRefusedAtCall},
		property{name: "refused_flush_dead_lettered_once", run: refusedFlushDeadLettered},
		property{name: "refused_outbox_row_dead_lettered_never_blocks", run: refusedRowNeverBlocks},
	)
}

// poisonMark is in the payload of every message the refusing wrapper refuses.
const poisonMark = "poison-pill"

// refusing is a client whose Publish refuses, permanently, every batch carrying poisonMark,
// and counts the refusals; everything else goes to the adapter.
type refusing struct {
	core.Backend
	refused chan string // batch ids, buffered
}

func newRefusing(b core.Backend) *refusing {
	return &refusing{Backend: b, refused: make(chan string, 100)}
}

func (r *refusing) Publish(ctx context.Context, b core.OutgoingBatch) error {
	if bytes.Contains(b.Body, []byte(poisonMark)) {
		select {
		case r.refused <- b.ID:
		default:
		}
		return fmt.Errorf("parity: the backend refuses batch %s for good: %w", b.ID, core.ErrRejected)
	}
	return r.Backend.Publish(ctx, b)
}

// oversizeRefusedAtCall: with NodeOptions.MaxMessageBytes 2 KiB, a call carrying one 4 KiB
// message fails at once with core.ErrRejected naming the queue and the limit, and none of its
// messages is delivered; a queue whose QueueConfig.MaxMessageBytes is higher takes the same
// message and delivers it intact.
func oversizeRefusedAtCall(x *X) {
	const limit = 2048
	small := declare(x, txmq.QueueConfig[Msg]{})
	large := declare(x, txmq.QueueConfig[Msg]{MaxMessageBytes: 16 << 10})
	rec := newRecorder()
	n := x.node(txmq.NodeOptions{MaxMessageBytes: limit})
	listen(x, rec, small, n, nil)
	listen(x, rec, large, n, nil)
	big := strings.Repeat("b", 4<<10)
	err := small.PublishMany(context.Background(), n, []Msg{{K: "refused-ok"}, {K: "refused-big", P: big}})
	if !errors.Is(err, core.ErrRejected) {
		x.T.Fatalf("publishing a 4 KiB message with MaxMessageBytes %d: %v; want an error wrapping core.ErrRejected", limit, err)
	}
	for _, s := range []string{fmt.Sprintf("%q", small.Name()), fmt.Sprint(limit), "MaxMessageBytes"} {
		if !strings.Contains(err.Error(), s) {
			x.T.Fatalf("the refusal %q does not name %s", err, s)
		}
	}
	keys := publishKeys(x, small, n, "after", 3, 3)
	if err := large.Publish(context.Background(), n, Msg{K: "override", P: big}); err != nil {
		x.T.Fatalf("publishing 4 KiB on a queue with MaxMessageBytes 16 KiB: %v", err)
	}
	keys = append(keys, "override")
	waitDelivered(x, rec, keys)
	x.idle(n)
	assertSame(x, rec, keys)
	if got, _ := rec.Value("override"); got.P != big {
		x.T.Fatalf("the overridden queue's message arrived with %d bytes, want %d", len(got.P), len(big))
	}
}

// oversizeTxRefusedAtCall: inside a transaction the same refusal comes at the call, before any
// outbox row is written; the app sees the error and nothing of the transaction is published.
func oversizeTxRefusedAtCall(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Require})
	rec := newRecorder()
	n := x.node(txmq.NodeOptions{MaxMessageBytes: 2048})
	listen(x, rec, q, n, nil)
	s := x.store(x.rawClient(), outbox.Options{})
	err := runInTx(x.ctx(), s, func(ctx context.Context) error {
		if err := q.Publish(ctx, n, Msg{K: "tx-ok"}); err != nil {
			return err
		}
		return q.Publish(ctx, n, Msg{K: "tx-big", P: strings.Repeat("b", 4<<10)})
	})
	if !errors.Is(err, core.ErrRejected) || !strings.Contains(err.Error(), fmt.Sprintf("%q", q.Name())) {
		x.T.Fatalf("RunInTx with an oversize publish: %v; want core.ErrRejected naming the queue", err)
	}
	if r := outboxRows(x, s); r != 0 {
		x.T.Fatalf("%d outbox rows after the refused transaction", r)
	}
	var keys []string
	if err := runInTx(x.ctx(), s, func(ctx context.Context) error {
		keys = publishKeysCtx(ctx, x, q, n, "tx-after", 4, 2)
		return nil
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	waitDelivered(x, rec, keys)
	x.idle(n)
	assertSame(x, rec, keys)
}

// refusedFlushDeadLettered: a buffered flush the backend refuses permanently is dead-lettered
// once (reason rejected, the backend's error), counted, never handed to the outbox, and the
// flushes after it are delivered.
func refusedFlushDeadLettered(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{})
	rec := newRecorder()
	c, _ := x.client()
	r := newRefusing(c)
	s := x.store(x.rawClient(), outbox.Options{RecoveryAge: time.Millisecond})
	n := x.nodeOn(r, txmq.NodeOptions{Handoff: s})
	listen(x, rec, q, n, nil)
	if err := q.PublishMany(context.Background(), n, []Msg{{K: "p1", P: poisonMark}, {K: "p2"}}); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	x.eventually(func() bool { return x.DeadLetters.Count(q.Name()) == 1 }, "the refused batch dead-lettered")
	keys := publishKeys(x, q, n, "later", 20, 5)
	waitDelivered(x, rec, keys)
	x.idle(n)
	assertSame(x, rec, keys)
	sleep(300 * time.Millisecond)
	if got := x.DeadLetters.Count(q.Name()); got != 1 {
		x.T.Fatalf("%d dead letters, want exactly 1", got)
	}
	for _, dl := range x.DeadLetters.Letters() {
		if dl.Queue == q.Name() && (dl.Reason != core.ReasonRejected || !strings.Contains(dl.Error, "for good") || dl.Messages != 2) {
			x.T.Fatalf("dead letter %+v; want reason %s, the backend's error and 2 messages", dl, core.ReasonRejected)
		}
	}
	if st := n.Stats(); st.Dropped[core.ReasonRejected] != 1 || st.HandedOff != 0 {
		x.T.Fatalf("stats %+v; want one drop with reason %s and nothing handed to the outbox", st, core.ReasonRejected)
	}
	if rows := outboxRows(x, s); rows != 0 {
		x.T.Fatalf("%d outbox rows: a refused batch must not go to the outbox", rows)
	}
}

// refusedRowNeverBlocks: outbox rows behind a row the backend refuses permanently (the first
// of the page) are published by the same sweep; the refused row is dead-lettered once, with
// reason rejected, and a later sweep does not try it again. A sweep that met the backend
// unavailable (a call that timed out on a loaded machine) stops early, as it must, and the
// property sweeps again (sweepUntilAvailable) rather than count on one sweep.
func refusedRowNeverBlocks(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{})
	rec := newRecorder()
	r := newRefusing(x.rawClient())
	s := x.store(r, outbox.Options{RecoveryAge: time.Millisecond, SweepPageSize: 4})
	n := x.node(txmq.NodeOptions{})
	listen(x, rec, q, n, nil)
	var batches []core.OutgoingBatch
	var keys []string
	for i := range 9 {
		k := fmt.Sprintf("row-%d", i)
		p := ""
		if i == 0 || i == 5 {
			p = poisonMark
		} else {
			keys = append(keys, k)
		}
		body, _ := json.Marshal(Msg{K: k, P: p})
		id := core.NewID()
		batches = append(batches, core.OutgoingBatch{ID: id, Queue: q.Name(), Messages: 1, Body: envelope.Encode(&envelope.Envelope{
			ID: id, Queue: q.Name(), Created: time.Now(), MessageIDs: []string{core.NewID()}, Messages: []json.RawMessage{body}})})
	}
	if err := s.Handoff(x.ctx(), batches); err != nil {
		x.T.Fatalf("Handoff: %v", err)
	}
	sleep(10 * time.Millisecond)
	if published := sweepUntilAvailable(x, s); published != len(keys) {
		x.T.Fatalf("the sweeps published %d rows; want the %d rows around the refused ones", published, len(keys))
	}
	waitDelivered(x, rec, keys)
	if rows := outboxRows(x, s); rows != 0 {
		x.T.Fatalf("%d outbox rows left; refused rows must move to the dead letters", rows)
	}
	if published, err := s.SweepOnce(x.ctx()); err != nil || published != 0 || len(r.refused) != 2 {
		x.T.Fatalf("second sweep = %d, %v, %d refusals in all; want 0, nil and 2 (no retry of a dead letter)", published, err, len(r.refused))
	}
	dls, err := s.ListDeadLetters(x.ctx(), outbox.DLQFilter{Queue: q.Name()})
	if err != nil || len(dls) != 2 {
		x.T.Fatalf("dead letters = %d, %v; want 2", len(dls), err)
	}
	for _, dl := range dls {
		if dl.Reason != core.ReasonRejected || (dl.BatchID != batches[0].ID && dl.BatchID != batches[5].ID) {
			x.T.Fatalf("dead letter %+v", dl)
		}
	}
	x.idle(n)
	assertSame(x, rec, keys)
}

// sweepUntilAvailable runs s.SweepOnce until a sweep ends without meeting the backend
// unavailable (core.ErrBackendUnavailable: the sweep stopped early without counting an
// attempt, so the next one takes the same rows), for at most Caps.Timeout, and returns the rows
// the sweeps published. Any other error fails the property.
func sweepUntilAvailable(x *X, s *outbox.Store) int {
	x.T.Helper()
	ctx := x.ctx()
	total := 0
	for {
		published, err := s.SweepOnce(ctx)
		total += published
		switch {
		case err == nil:
			return total
		case !errors.Is(err, core.ErrBackendUnavailable) || ctx.Err() != nil:
			x.T.Fatalf("SweepOnce after %d rows published: %v; want no error (or the backend unavailable, then a sweep that ends)", total, err)
		}
		x.T.Logf("parity: a sweep met the backend unavailable after %d rows (%v); sweeping again", total, err)
		sleep(50 * time.Millisecond) // pacing only: a backend that refuses at once is not hammered
	}
}
