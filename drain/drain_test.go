package drain_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/txmqtest"
)

// TestFetchSplitsFreeSlotsOldFirst: old work is handed out first, and a Fetch never returns
// more than the free slots across old and primary together.
func TestFetchSplitsFreeSlotsOldFirst(t *testing.T) {
	t.Parallel()
	primary, old := newMemory(t), newMemory(t)
	d := drain.New(&counting{Backend: primary}, []core.Backend{&counting{Backend: old}}, &drain.Options{Logger: txmqtest.DiscardLogger()})
	for i := range 5 {
		publish(t, old, rawBatch("q", false, fmt.Sprint("old", i)))
		publish(t, primary, rawBatch("q", false, fmt.Sprint("new", i)))
	}
	cs := fetch(t, d, core.QueueSlots{Queue: "q", Free: 3})
	if len(cs) != 3 {
		t.Fatalf("Fetch with 3 free slots returned %d claims", len(cs))
	}
	if got := depth(t, old, "q"); got.InFlight != 3 {
		t.Fatalf("claims did not come from the old backend first: old depth %+v", got)
	}
	cs = fetch(t, d, core.QueueSlots{Queue: "q", Free: 4})
	if len(cs) != 4 {
		t.Fatalf("Fetch with 4 free slots returned %d claims", len(cs))
	}
	if o, p := depth(t, old, "q"), depth(t, primary, "q"); o.InFlight != 5 || p.InFlight != 2 {
		t.Fatalf("want the 2 old batches left then 2 from the primary; old %+v primary %+v", o, p)
	}
	if got := depth(t, d, "q"); got != (core.Depth{InFlight: 7, Ready: 3}) {
		t.Fatalf("Depths does not add up old and primary: %+v", got)
	}
	cs = fetch(t, d, core.QueueSlots{Queue: "q", Free: core.Unlimited})
	if len(cs) != 3 {
		t.Fatalf("Unlimited fetch returned %d claims; want the 3 left", len(cs))
	}
}

// TestSettleGoesToOrigin: Ack, Retry, Drop and Extend of an old claim go to the old backend,
// Extend updates LeaseUntil, a second settle is a no-op, and Publish goes to the primary.
func TestSettleGoesToOrigin(t *testing.T) {
	t.Parallel()
	primary, old := newMemory(t), newMemory(t)
	pc := &counting{Backend: primary}
	oc := &counting{Backend: old}
	d := drain.New(pc, []core.Backend{oc}, &drain.Options{Logger: txmqtest.DiscardLogger()})
	publish(t, old, rawBatch("q", false, "a"), rawBatch("q", false, "b"), rawBatch("q", false, "c"))
	publish(t, d, rawBatch("q", false, "new"))
	if pc.publishes.Load() != 1 || oc.publishes.Load() != 0 {
		t.Fatalf("Publish went to primary %d times and old %d times; want 1 and 0", pc.publishes.Load(), oc.publishes.Load())
	}
	cs := fetch(t, d, core.QueueSlots{Queue: "q", Free: 3})
	if len(cs) != 3 {
		t.Fatalf("got %d claims", len(cs))
	}
	ctx := context.Background()
	before := cs[0].LeaseUntil
	if err := d.Extend(ctx, cs[0], time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if !cs[0].LeaseUntil.After(before.Add(30 * time.Second)) {
		t.Fatalf("Extend did not update LeaseUntil: %v -> %v", before, cs[0].LeaseUntil)
	}
	if err := d.Ack(ctx, cs[0]); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if err := d.Ack(ctx, cs[0]); err != nil {
		t.Fatalf("second Ack: %v; want a no-op", err)
	}
	if err := d.Retry(ctx, cs[1], cs[1].Body, time.Hour); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if err := d.Drop(ctx, cs[2], core.ReasonDeliveryExhausted); err != nil {
		t.Fatalf("Drop: %v", err)
	}
	if got := depth(t, old, "q"); got != (core.Depth{Delayed: 1}) {
		t.Fatalf("old backend depth %+v; want the retried batch delayed there", got)
	}
	if got := depth(t, primary, "q"); got != (core.Depth{Ready: 1}) {
		t.Fatalf("primary depth %+v; want the new batch", got)
	}
}

// TestExclusiveWaitsForOld: the primary is not asked for an exclusive queue while the old
// backend holds any batch of it, even one in flight elsewhere.
func TestExclusiveWaitsForOld(t *testing.T) {
	t.Parallel()
	primary, old := newMemory(t), newMemory(t)
	d := drain.New(&counting{Backend: primary}, []core.Backend{&counting{Backend: old}}, &drain.Options{Logger: txmqtest.DiscardLogger()})
	publish(t, old, rawBatch("x", true, "old"))
	publish(t, primary, rawBatch("x", true, "new"))
	slot := core.QueueSlots{Queue: "x", Free: 1, Exclusive: true}
	elsewhere := fetch(t, old, slot) // another node, on the old setting, runs the old batch
	if len(elsewhere) != 1 {
		t.Fatalf("old fetch: %d claims", len(elsewhere))
	}
	if cs := fetch(t, d, slot); len(cs) != 0 {
		t.Fatalf("the primary's exclusive batch was handed out while the old one is in flight")
	}
	if err := old.Ack(context.Background(), elsewhere[0]); err != nil {
		t.Fatal(err)
	}
	cs := fetch(t, d, slot)
	if len(cs) != 1 {
		t.Fatalf("after the old batch finished, want the primary's batch; got %d claims", len(cs))
	}
}

// TestDrainRunsOldWorkThenStopsPolling: batches left in two old backends are all delivered by
// nodes on the drain backend; new publishes land in the primary; each old backend ends empty,
// is declared drained and no longer polled, and stays open (for re-checks) until Close.
func TestDrainRunsOldWorkThenStopsPolling(t *testing.T) {
	t.Parallel()
	primary, old1, old2 := newMemory(t), newMemory(t), newMemory(t)
	reg := txmq.NewRegistry()
	q, err := txmq.DeclareIn(reg, "jobs", txmq.QueueConfig[string]{Transactional: txmq.Never})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, old := range []core.Backend{old1, old2} {
		n := txmqtest.StartNode(t, old, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger()})
		for j := range 200 {
			k := fmt.Sprintf("old%d-%d", i, j)
			want = append(want, k)
			if err := q.Publish(context.Background(), n, k); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if depth(t, old1, "jobs").Ready == 0 || depth(t, old2, "jobs").Ready == 0 {
		t.Fatal("the old backends hold nothing to drain")
	}
	pc, o1, o2 := &counting{Backend: primary}, &counting{Backend: old1}, &counting{Backend: old2}
	d := drain.New(pc, []core.Backend{o1, o2}, &drain.Options{Logger: txmqtest.DiscardLogger(), CheckInterval: 50 * time.Millisecond})
	rec := txmqtest.NewRecorder(func(s string) string { return s })
	node := txmqtest.StartNode(t, d, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger(), PollWait: 50 * time.Millisecond})
	if err := rec.Listen(q, node, func(context.Context, []string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for j := range 100 {
		k := fmt.Sprintf("new-%d", j)
		want = append(want, k)
		if err := q.Publish(context.Background(), node, k); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, func() bool { return rec.HasAll(want) }, "every old and new message delivered")
	if o1.publishes.Load()+o2.publishes.Load() != 0 || pc.publishes.Load() == 0 {
		t.Fatalf("publishes: primary %d, old %d+%d; want all on the primary", pc.publishes.Load(), o1.publishes.Load(), o2.publishes.Load())
	}
	db := d.(*drain.Backend)
	eventually(t, 10*time.Second, func() bool { return len(db.Draining()) == 0 }, "both old backends drained")
	for i, o := range []*counting{o1, o2} {
		if o.closes.Load() != 0 {
			t.Fatalf("old backend %d closed %d times after draining; want it kept open for re-checks", i, o.closes.Load())
		}
	}
	if got := depth(t, old1, "jobs"); got != (core.Depth{}) {
		t.Fatalf("old backend not empty: %+v", got)
	}
	f1, f2 := o1.fetches.Load(), o2.fetches.Load()
	time.Sleep(300 * time.Millisecond) // several polls
	if o1.fetches.Load() != f1 || o2.fetches.Load() != f2 {
		t.Fatalf("a drained old backend is still polled: %d -> %d, %d -> %d", f1, o1.fetches.Load(), f2, o2.fetches.Load())
	}
	txmqtest.WaitIdle(t, node)
	if err := node.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for i, o := range []*counting{o1, o2} {
		if o.closes.Load() != 1 {
			t.Fatalf("old backend %d closed %d times by the wrapper's Close; want 1", i, o.closes.Load())
		}
	}
}

// TestExclusivePeakOneAcrossOldAndPrimary: three nodes on drain backends sharing one old and
// one primary backend never run two batches of an exclusive queue at once, while the old one
// drains and new batches arrive in the primary.
func TestExclusivePeakOneAcrossOldAndPrimary(t *testing.T) {
	t.Parallel()
	primary, old := newMemory(t), newMemory(t)
	reg := txmq.NewRegistry()
	q, err := txmq.DeclareIn(reg, "reports", txmq.QueueConfig[string]{Transactional: txmq.Never, Exclusive: true, MaxBatchMessages: 1})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for j := range 30 {
		k := fmt.Sprintf("old-%d", j)
		want = append(want, k)
		publish(t, old, rawBatch("reports", true, k))
	}
	var conc concurrency
	var mu sync.Mutex
	seen := map[string]bool{}
	var nodes []*txmq.Node
	for range 3 {
		d := drain.New(&counting{Backend: primary}, []core.Backend{&counting{Backend: old}}, &drain.Options{Logger: txmqtest.DiscardLogger(), CheckInterval: 50 * time.Millisecond})
		n := txmqtest.StartNode(t, d, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger(), PollWait: 20 * time.Millisecond})
		if err := q.Listen(n, func(_ context.Context, msgs []string) error {
			conc.enter()
			defer conc.leave()
			time.Sleep(3 * time.Millisecond)
			mu.Lock()
			for _, m := range msgs {
				seen[m] = true
			}
			mu.Unlock()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	for j := range 30 {
		k := fmt.Sprintf("new-%d", j)
		want = append(want, k)
		if err := q.Publish(context.Background(), nodes[j%3], k); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range want {
			if !seen[k] {
				return false
			}
		}
		return true
	}, "every exclusive message delivered")
	if p := conc.max(); p != 1 {
		t.Fatalf("peak concurrency of the exclusive queue across old and primary: %d; want 1", p)
	}
	txmqtest.WaitIdle(t, nodes...)
}

// TestSettleAfterDrainedIsLeaseLost: a claim from an old backend that was drained meanwhile
// cannot be settled: its batch ran elsewhere.
func TestSettleAfterDrainedIsLeaseLost(t *testing.T) {
	t.Parallel()
	primary, old := newMemory(t), newMemory(t)
	d := drain.New(&counting{Backend: primary}, []core.Backend{&counting{Backend: old}}, &drain.Options{Logger: txmqtest.DiscardLogger(), CheckInterval: time.Millisecond})
	publish(t, old, rawBatch("q", false, "a"))
	ctx := context.Background()
	cs, err := d.Fetch(ctx, core.FetchRequest{Node: "a", Lease: 100 * time.Millisecond, Queues: []core.QueueSlots{{Queue: "q", Free: 1}}})
	if err != nil || len(cs) != 1 {
		t.Fatalf("got %d claims, %v", len(cs), err)
	}
	// The lease runs out; the batch runs elsewhere and finishes: the old backend is empty.
	time.Sleep(150 * time.Millisecond)
	other := fetch(t, old, core.QueueSlots{Queue: "q", Free: 1})
	if len(other) != 1 {
		t.Fatalf("the expired batch was not handed out again")
	}
	if err := old.Ack(ctx, other[0]); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() bool {
		fetch(t, d, core.QueueSlots{Queue: "q", Free: 1})
		return len(d.(*drain.Backend).Draining()) == 0
	}, "drained")
	if err := d.Ack(ctx, cs[0]); !errors.Is(err, core.ErrLeaseLost) {
		t.Fatalf("Ack after drain: %v; want ErrLeaseLost", err)
	}
}
