package parity

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

func init() {
	register("outcomes",
		property{name: "crash_between_parts_and_ack", run: crashBetweenPartsAndAck},
	)
}

// crashAfterParts is a backend that loses the first Ack after the parts of a split were
// published (it fails, as a node dying between the two steps would leave it), so the batch
// comes back after its lease with the parts already stored. It has no Split method: the engine
// takes the publish-then-ack path on every adapter.
type crashAfterParts struct {
	core.Backend
	mu      sync.Mutex
	parts   int
	crashed bool
}

func (c *crashAfterParts) Publish(ctx context.Context, b core.OutgoingBatch) error {
	err := c.Backend.Publish(ctx, b)
	if err == nil && strings.Contains(b.ID, "/") {
		c.mu.Lock()
		c.parts++
		c.mu.Unlock()
	}
	return err
}

var errCrashed = errors.New("parity: the node died before its Ack")

func (c *crashAfterParts) Ack(ctx context.Context, cl *core.Claim) error {
	c.mu.Lock()
	crash := c.parts > 0 && !c.crashed
	c.crashed = c.crashed || crash
	c.mu.Unlock()
	if crash {
		return errCrashed
	}
	return c.Backend.Ack(ctx, cl)
}

// crashBetweenPartsAndAck: a split whose Ack is lost after its parts were published (the
// fallback path, on any adapter) runs the whole batch again; the second split derives the same
// batch ids, so every message still ends once in its group: one dead letter and one OnError
// for the dropped message, one for the retried one after its budget, the done message done
// (it ran once per run of the batch: twice).
func crashBetweenPartsAndAck(x *X) {
	const budget = 3
	var onErr onErrorLog
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: budget, MaxBatchMessages: 3, OnError: onErr.fn,
		Backoff: func(int) time.Duration { return 20 * time.Millisecond }})
	rec := newRecorder()
	role := func(m Msg) string { return m.K[strings.LastIndexByte(m.K, '-')+1:] }
	fn := func(ctx context.Context, msgs []Msg) error {
		res := txmq.NewResults(msgs)
		for i, m := range msgs {
			switch role(m) {
			case "retry":
				res.Retry(i, errBoom)
			case "drop":
				res.Drop(i, errBoom)
			}
		}
		return res.Err()
	}
	be, _ := x.client()
	crash := &crashAfterParts{Backend: be}
	// A lease long enough that load does not fence a run (an extra run would blur the counts),
	// short enough that the crashed claim comes back well within the suite's timeout.
	n := x.nodeOn(crash, txmq.NodeOptions{Lease: 4 * x.Caps.Lease})
	listen(x, rec, q, n, fn)
	p := q.Name()
	keys := []string{p + "-done", p + "-drop", p + "-retry"}
	if err := q.PublishMany(context.Background(), n, []Msg{{K: keys[0]}, {K: keys[1]}, {K: keys[2]}}); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	x.eventually(func() bool { return x.DeadLetters.Count(q.Name()) >= 2 && rec.Count(keys[0]) >= 2 }, func() string {
		return fmt.Sprintf("%d dead letter(s) of 2, the batch run twice; runs so far: %s", x.DeadLetters.Count(q.Name()), rec.Summary())
	})
	x.idle(n)
	sleep(3 * x.Caps.PollWait)
	x.idle(n)
	crash.mu.Lock()
	crashed := crash.crashed
	crash.mu.Unlock()
	if !crashed {
		x.T.Fatal("the split never published a part before its Ack")
	}
	if got := rec.Count(keys[0]); got != 2 {
		x.T.Errorf("the done message ran %d times; want 2 (the batch ran again after the lost Ack)", got)
	}
	reasons := map[string]int{}
	for _, l := range x.DeadLetters.Letters() {
		reasons[l.Reason]++
	}
	if len(x.DeadLetters.Letters()) != 2 || reasons[core.ReasonPermanent] != 1 || reasons[core.ReasonDeliveryExhausted] != 1 {
		x.T.Fatalf("dead letters by reason %v; want one permanent and one delivery_exhausted", reasons)
	}
	if calls := onErr.list(); len(calls) != 2 {
		x.T.Fatalf("OnError calls %q; want 2 (one per dropped message)", calls)
	}
}
