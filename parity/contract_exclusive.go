package parity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core"
)

func init() {
	register("contract",
		property{name: "exclusive_peak_one_raw_clients", run: exclusivePeakRaw},
		property{name: "exclusive_released_by_settle_and_expiry", run: exclusiveReleased},
	)
}

// exclusivePeakRaw: three clients (three nodes) fetch an Exclusive queue and a plain one in
// the same requests as fast as they can: at most one batch of the Exclusive queue is ever
// claimed across them, never two in one Fetch, while the plain queue is not limited; every
// batch of both is acked.
func exclusivePeakRaw(x *X) {
	const batches = 10
	cs := []core.Backend{x.rawClient(), x.rawClient(), x.rawClient()}
	qx, qf := x.queueName(), x.queueName()
	ctx, cancel := context.WithTimeout(context.Background(), 3*x.Caps.Timeout)
	defer cancel()
	for i := range batches {
		if err := cs[0].Publish(ctx, rawBatch(qx, true, fmt.Sprintf("x-%d", i))); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
		if err := cs[0].Publish(ctx, rawBatch(qf, false, fmt.Sprintf("f-%d", i))); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
	}
	lease := 5 * x.Caps.Lease
	var running, peak, done, freeDone atomic.Int64
	var wg sync.WaitGroup
	for i, b := range cs {
		wg.Go(func() {
			for (done.Load() < batches || freeDone.Load() < batches) && ctx.Err() == nil {
				got, err := b.Fetch(ctx, core.FetchRequest{Node: fmt.Sprintf("parity-x%d", i), Lease: lease, Wait: x.Caps.PollWait,
					Queues: []core.QueueSlots{{Queue: qx, Free: core.Unlimited, Exclusive: true}, {Queue: qf, Free: core.Unlimited}}})
				if err != nil {
					if ctx.Err() == nil {
						x.T.Errorf("Fetch: %v", err)
					}
					return
				}
				xs := 0
				for _, c := range got {
					if c.Queue == qf {
						if err := b.Ack(ctx, c); err != nil {
							x.T.Errorf("Ack: %v", err)
						}
						freeDone.Add(1)
						continue
					}
					xs++
					now := running.Add(1)
					for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
					}
					sleep(5 * time.Millisecond) // hold the claim while the others fetch
					running.Add(-1)             // before the Ack: the Ack releases the queue
					if err := b.Ack(ctx, c); err != nil {
						x.T.Errorf("Ack: %v", err)
					}
					done.Add(1)
				}
				if xs > 1 {
					x.T.Errorf("one Fetch claimed %d batches of an Exclusive queue", xs)
				}
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p != 1 {
		x.T.Errorf("peak claimed batches of the Exclusive queue across three clients = %d; want 1", p)
	}
	if done.Load() != batches || freeDone.Load() != batches {
		x.T.Errorf("acked %d of %d Exclusive and %d of %d plain batches", done.Load(), batches, freeDone.Load(), batches)
	}
}

// exclusiveReleased: a claim of an Exclusive queue holds it against another client while its
// lease runs, an extended lease included; Retry, Drop, lease expiry and Ack each release it.
// The holder whose lease expired and whose queue another client claimed can no longer ack.
func exclusiveReleased(x *X) {
	ctx := x.ctx()
	a, b := x.rawClient(), x.rawClient()
	qn := x.queueName()
	lease := x.Caps.Lease
	for i := range 4 {
		if err := a.Publish(ctx, rawBatch(qn, true, fmt.Sprintf("x-%d", i))); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
	}
	fetchX := func(be core.Backend, l time.Duration) []*core.Claim {
		x.T.Helper()
		cs, err := be.Fetch(ctx, core.FetchRequest{Node: "parity-xr", Lease: l, Wait: x.Caps.PollWait, Max: 1,
			Queues: []core.QueueSlots{{Queue: qn, Free: 1, Exclusive: true}}})
		if err != nil {
			x.T.Fatalf("Fetch: %v", err)
		}
		return cs
	}
	fetchXOne := func(be core.Backend, l time.Duration, after string) *core.Claim {
		x.T.Helper()
		var got *core.Claim
		x.eventually(func() bool {
			cs := fetchX(be, l)
			if len(cs) > 0 {
				got = cs[0]
			}
			return got != nil
		}, "the Exclusive queue released by "+after)
		return got
	}
	long := 2 * lease
	c1 := fetchXOne(a, long, "nothing (first claim)")
	if cs := fetchX(b, lease); len(cs) != 0 {
		x.T.Fatalf("another client claimed the Exclusive queue while a claim of it was held")
	}
	// Extend with 60% of the lease left, then wait past the first lease: still held.
	first := c1.LeaseUntil
	sleep(time.Until(first) - long*6/10)
	if err := a.Extend(ctx, c1, long); err != nil {
		x.T.Fatalf("Extend: %v", err)
	}
	sleep(time.Until(first) + 100*time.Millisecond)
	if cs := fetchX(b, lease); len(cs) != 0 && time.Now().Before(c1.LeaseUntil) {
		x.T.Fatalf("another client claimed the Exclusive queue while the holder's extended lease ran")
	}
	if err := a.Retry(ctx, c1, c1.Body, time.Hour); err != nil {
		x.T.Fatalf("Retry: %v", err)
	}
	c2 := fetchXOne(b, lease, "Retry")
	if err := b.Drop(ctx, c2, core.ReasonDeliveryExhausted); err != nil {
		x.T.Fatalf("Drop: %v", err)
	}
	c3 := fetchXOne(a, lease, "Drop")
	c4 := fetchXOne(b, 3*lease, "lease expiry")
	if time.Now().Before(c3.LeaseUntil) {
		x.T.Fatalf("another client claimed the Exclusive queue %v before the holder's lease ended", time.Until(c3.LeaseUntil))
	}
	if err := a.Ack(ctx, c3); !errors.Is(err, core.ErrLeaseLost) {
		x.T.Fatalf("Ack by the holder whose lease expired, after another client claimed the queue: %v; want an error wrapping core.ErrLeaseLost", err)
	}
	if cs := fetchX(a, lease); len(cs) != 0 {
		x.T.Fatalf("claimed the Exclusive queue while another client's claim of it was held")
	}
	if err := b.Ack(ctx, c4); err != nil {
		x.T.Fatalf("Ack: %v", err)
	}
	c5 := fetchXOne(a, lease, "Ack")
	if err := a.Ack(ctx, c5); err != nil {
		x.T.Fatalf("Ack: %v", err)
	}
}
