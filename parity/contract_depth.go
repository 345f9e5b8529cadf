package parity

import (
	"time"

	"github.com/txmq/txmq/core"
)

func init() {
	register("contract",
		property{name: "depth_oldest_ready", run: depthOldestReady},
	)
}

// oldestSkew bounds the backend's clock against the test's (same machine or a loopback
// emulator) plus one call's latency on a loaded machine.
const oldestSkew = time.Second

// depthOldestReady: Depth.OldestReady is zero whenever no batch is ready, on every adapter.
// Where the adapter reports it at all (it is optional: an adapter that never sets it counts
// as not supported), it is when the longest-waiting ready batch became claimable on the
// backend's clock: its publish time, stable while it waits (so the age grows), zero once the
// batch is in flight or only delayed batches remain, and the lease end once a lease ran out.
func depthOldestReady(x *X) {
	ctx := x.ctx()
	b := x.rawClient()
	q := x.queueName()
	oldest := func(what string) (core.Depth, time.Time) {
		x.T.Helper()
		d, err := b.Depths(ctx, []string{q})
		if err != nil {
			x.T.Fatalf("Depths: %v", err)
		}
		got := d[q]
		if got.Ready == 0 && !got.OldestReady.IsZero() {
			x.T.Fatalf("%s: depth %+v: OldestReady set while no batch is ready", what, got)
		}
		return got, got.OldestReady
	}
	within := func(what string, got, lo, hi time.Time) {
		x.T.Helper()
		if got.Before(lo.Add(-oldestSkew)) || got.After(hi.Add(oldestSkew)) {
			x.T.Fatalf("%s: OldestReady = %v, want within [%v, %v] (±%v)", what, got, lo, hi, oldestSkew)
		}
	}
	if _, o := oldest("empty queue"); !o.IsZero() {
		x.T.Fatalf("empty queue: OldestReady = %v, want zero", o)
	}
	later := rawBatch(q, false, "later")
	later.Delay, later.NotBefore = time.Hour, time.Now().Add(time.Hour)
	if err := b.Publish(ctx, later); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	if _, o := oldest("only a delayed batch"); !o.IsZero() {
		x.T.Fatalf("only a delayed batch: OldestReady = %v, want zero", o)
	}
	before := time.Now()
	if err := b.Publish(ctx, rawBatch(q, false, "now")); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	after := time.Now()
	// Approximate depths may show the ready batch late: wait for it to be counted.
	deadline := time.Now().Add(x.Caps.Timeout)
	d, first := oldest("one ready batch")
	for d.Ready == 0 && time.Now().Before(deadline) {
		sleep(50 * time.Millisecond)
		d, first = oldest("one ready batch")
	}
	if first.IsZero() {
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported by the adapter: Depths never sets OldestReady (optional)", x.h.Name())
	}
	within("one ready batch", first, before, after)
	sleep(300 * time.Millisecond)
	if _, o := oldest("the ready batch waited"); !o.Equal(first) {
		x.T.Fatalf("OldestReady moved from %v to %v while the batch waited", first, o)
	}
	c := fetchOne(x, b, q, time.Second)
	if _, o := oldest("the ready batch in flight, the other delayed"); !o.IsZero() {
		x.T.Fatalf("the ready batch in flight, the other delayed: OldestReady = %v, want zero", o)
	}
	sleep(time.Until(c.LeaseUntil) + 500*time.Millisecond)
	d, o := oldest("after the lease ran out")
	if exactDepths(b) && d.Ready != 1 {
		x.T.Fatalf("after the lease ran out: depth %+v, want 1 ready", d)
	}
	if !o.IsZero() || exactDepths(b) {
		within("after the 1 s lease ran out", o, c.LeaseUntil, c.LeaseUntil)
	}
}
