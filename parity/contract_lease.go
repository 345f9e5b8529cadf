package parity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
)

func init() {
	register("contract",
		property{name: "lost_lease_every_settle_refused", run: lostLeaseEverySettle},
		property{name: "settle_twice_noop_every_pair", run: settleTwiceEveryPair},
	)
}

// claimOps are the calls on a claim, by name.
func claimOps(x *X, b core.Backend) map[string]func(c *core.Claim) error {
	ctx := x.ctx()
	return map[string]func(c *core.Claim) error{
		"Ack":    func(c *core.Claim) error { return b.Ack(ctx, c) },
		"Drop":   func(c *core.Claim) error { return b.Drop(ctx, c, core.ReasonWorkerLost) },
		"Retry":  func(c *core.Claim) error { return b.Retry(ctx, c, c.Body, 0) },
		"Extend": func(c *core.Claim) error { return b.Extend(ctx, c, x.Caps.Lease) },
	}
}

// exactDepths reports whether b's Depths are exact (not core.ApproximateDepths).
func exactDepths(b core.Backend) bool { return core.DepthsSettle(b) == 0 }

// lostLeaseEverySettle: once a claim's lease ran out, Ack, Drop, Retry and Extend of it return
// an error wrapping core.ErrLeaseLost, twice in a row, whether or not another client claimed
// the batch again, and leave the batch alone: the other client's claim acks fine, and a batch
// nobody claimed again is still there, not delayed (exact depths), and handed out next with
// Deliveries 2.
func lostLeaseEverySettle(x *X) {
	ctx := x.ctx()
	a, b := x.rawClient(), x.rawClient()
	lease := x.Caps.Lease
	type tc struct {
		op        string
		reclaimed bool
		queue     string
		stale     *core.Claim
	}
	var cases []*tc
	for _, op := range []string{"Ack", "Drop", "Retry", "Extend"} {
		for _, reclaimed := range []bool{false, true} {
			c := &tc{op: op, reclaimed: reclaimed, queue: x.queueName()}
			if err := a.Publish(ctx, rawBatch(c.queue, false, op)); err != nil {
				x.T.Fatalf("Publish: %v", err)
			}
			cases = append(cases, c)
		}
	}
	var last time.Time
	for _, c := range cases {
		c.stale = fetchOne(x, a, c.queue, lease)
		if c.stale.Deliveries != 1 {
			x.T.Errorf("a first claim has Deliveries %d; want 1", c.stale.Deliveries)
		}
		last = c.stale.LeaseUntil
	}
	sleep(time.Until(last) + 100*time.Millisecond)
	for _, c := range cases {
		ctx, ops := x.ctx(), claimOps(x, a) // a Caps.Timeout for each case, as for each pair below
		name := fmt.Sprintf("%s of a claim whose lease ran out (claimed again: %v)", c.op, c.reclaimed)
		var current *core.Claim
		if c.reclaimed {
			current = fetchOne(x, b, c.queue, 3*lease)
			if current.Deliveries != 2 {
				x.T.Errorf("a claim after an expired lease has Deliveries %d; want 2", current.Deliveries)
			}
		}
		for i := range 2 {
			if err := ops[c.op](c.stale); !errors.Is(err, core.ErrLeaseLost) {
				x.T.Errorf("%s, call %d: %v; want an error wrapping core.ErrLeaseLost", name, i+1, err)
			}
		}
		if c.reclaimed {
			if err := b.Ack(ctx, current); err != nil {
				x.T.Errorf("%s: the current claim's Ack: %v", name, err)
			}
			continue
		}
		if exactDepths(b) {
			// Ready, or still in flight where the backend counts an expired lease as in flight
			// until it hands the batch out again (JetStream's ack pending).
			x.eventually(func() bool { d := depths(x, b, c.queue); return d.Ready+d.InFlight == 1 && d.Delayed == 0 }, func() string {
				return fmt.Sprintf("%s: depth %+v; want the batch still there, not delayed (the stale call must not touch it)", name, depths(x, b, c.queue))
			})
		}
		next := fetchOne(x, b, c.queue, 3*lease)
		if next.Deliveries != 2 {
			x.T.Errorf("%s: the batch came next with Deliveries %d; want 2", name, next.Deliveries)
		}
		if err := b.Ack(ctx, next); err != nil {
			x.T.Errorf("%s: Ack of the next claim: %v", name, err)
		}
	}
}

// settleTwiceEveryPair: after a settle (Ack, Drop, or Retry with a new body and an hour's
// delay) succeeded, a second settle of any kind and an Extend of the claim return nil and
// change nothing: the depths stay as the first settle left them (exact depths) and nothing is
// handed out. Each pair has a Caps.Timeout of its own (nine pairs, each on a new queue, may
// take longer than one on a loaded machine: SQS made 21.9 s of them once).
func settleTwiceEveryPair(x *X) {
	var ctx context.Context // the current pair's, read by the settles
	b := x.rawClient()
	lease := 3 * x.Caps.Lease
	settles := map[string]func(c *core.Claim) error{
		"Ack":   func(c *core.Claim) error { return b.Ack(ctx, c) },
		"Drop":  func(c *core.Claim) error { return b.Drop(ctx, c, core.ReasonDeliveryExhausted) },
		"Retry": func(c *core.Claim) error { return b.Retry(ctx, c, rawBatch(c.Queue, false, "v2").Body, time.Hour) },
	}
	for _, firstOp := range []string{"Ack", "Drop", "Retry"} {
		for _, secondOp := range []string{"Ack", "Drop", "Retry"} {
			ctx = x.ctx()
			qn := x.queueName()
			if err := b.Publish(ctx, rawBatch(qn, false, firstOp+secondOp)); err != nil {
				x.T.Fatalf("Publish: %v", err)
			}
			c := fetchOne(x, b, qn, lease)
			if err := settles[firstOp](c); err != nil {
				x.T.Fatalf("%s: %v", firstOp, err)
			}
			want := core.Depth{}
			if firstOp == "Retry" {
				want = core.Depth{Delayed: 1}
			}
			if exactDepths(b) {
				x.eventually(func() bool { return depths(x, b, qn) == want }, func() string {
					return fmt.Sprintf("after %s: depth %+v; want %+v", firstOp, depths(x, b, qn), want)
				})
			}
			if err := settles[secondOp](c); err != nil {
				x.T.Errorf("%s after %s: %v; want nil (a no-op)", secondOp, firstOp, err)
			}
			if err := b.Extend(ctx, c, lease); err != nil {
				x.T.Errorf("Extend after %s: %v; want nil (a no-op)", firstOp, err)
			}
			if exactDepths(b) {
				if d := depths(x, b, qn); d != want {
					x.T.Errorf("%s after %s changed the depth to %+v; want %+v", secondOp, firstOp, d, want)
				}
			}
			cs, err := b.Fetch(ctx, req1("parity-twice", qn, 1, lease, x.Caps.PollWait))
			if err != nil {
				x.T.Fatalf("Fetch: %v", err)
			}
			if len(cs) > 0 {
				x.T.Errorf("after %s then %s, the batch was handed out again", firstOp, secondOp)
			}
		}
	}
}
