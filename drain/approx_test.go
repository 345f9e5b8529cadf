package drain_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/txmqtest"
)

// approx is an old backend whose Depths are approximate (core.ApproximateDepths) and, while
// lag is set, lag behind: they read all zeros whatever it holds, as SQS's counts can.
type approx struct {
	counting
	settle time.Duration
	lag    atomic.Bool
}

func (a *approx) DepthsSettle() time.Duration { return a.settle }

func (a *approx) Depths(ctx context.Context, queues []string) (map[string]core.Depth, error) {
	if a.lag.Load() {
		return map[string]core.Depth{}, nil
	}
	return a.counting.Depths(ctx, queues)
}

func newApprox(b core.Backend, settle time.Duration) *approx {
	return &approx{counting: counting{Backend: b}, settle: settle}
}

// An old backend with approximate depths is drained only after its checks read empty for its
// settle window and for the longest lease, not after two readings.
func TestApproximateOldDrainedAfterSettleWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		settle, lease time.Duration
		want          time.Duration
	}{
		{"settle window", 400 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond},
		{"lease longer than the settle window", 200 * time.Millisecond, 600 * time.Millisecond, 600 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			old := newApprox(newMemory(t), tc.settle)
			d := drain.New(newMemory(t), []core.Backend{old}, &drain.Options{Logger: txmqtest.DiscardLogger(), CheckInterval: 20 * time.Millisecond})
			db := d.(*drain.Backend)
			start := time.Now()
			for len(db.Draining()) > 0 {
				if time.Since(start) > 10*time.Second {
					t.Fatal("an empty approximate old backend was never drained")
				}
				if _, err := d.Fetch(context.Background(), core.FetchRequest{Node: "n", Lease: tc.lease, Queues: []core.QueueSlots{{Queue: "q", Free: 1}}}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if took := time.Since(start); took < tc.want {
				t.Fatalf("approximate old backend drained after %v of empty readings; want at least %v", took, tc.want)
			}
			if st := db.Status(); len(st) != 1 || !st[0].Drained || st[0].Settle != tc.want {
				t.Fatalf("Status = %+v; want one drained old backend with settle %v", st, tc.want)
			}
		})
	}
}

// An old backend with approximate depths clears an exclusive queue for the primary only
// after reading it empty for its settle window: zeros that lag behind a batch in flight
// elsewhere do not clear it.
func TestApproximateExclusiveClearance(t *testing.T) {
	t.Parallel()
	const settle = time.Second // well beyond the lagging phase below, even on a loaded machine
	primary, oldMem := newMemory(t), newMemory(t)
	old := newApprox(oldMem, settle)
	d := drain.New(primary, []core.Backend{old}, &drain.Options{Logger: txmqtest.DiscardLogger(), CheckInterval: 20 * time.Millisecond})
	slot := core.QueueSlots{Queue: "x", Free: 1, Exclusive: true}
	fetchD := func() []*core.Claim { // with a lease shorter than the settle window
		t.Helper()
		cs, err := d.Fetch(context.Background(), core.FetchRequest{Node: "n", Lease: 100 * time.Millisecond, Queues: []core.QueueSlots{slot}})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	publish(t, oldMem, rawBatch("x", true, "old"))
	publish(t, primary, rawBatch("x", true, "new"))
	elsewhere := fetch(t, oldMem, slot) // a node on the old setting runs the old batch
	if len(elsewhere) != 1 {
		t.Fatalf("old fetch: %d claims", len(elsewhere))
	}
	old.lag.Store(true) // the counts have not caught up with the claim yet
	for range 5 {
		if cs := fetchD(); len(cs) != 0 {
			t.Fatal("the primary's exclusive batch was handed out on lagging zero counts, while the old batch runs elsewhere")
		}
		time.Sleep(20 * time.Millisecond)
	}
	old.lag.Store(false)
	for range 3 {
		if cs := fetchD(); len(cs) != 0 {
			t.Fatal("the primary's exclusive batch was handed out while the old one is in flight")
		}
	}
	if err := oldMem.Ack(context.Background(), elsewhere[0]); err != nil {
		t.Fatal(err)
	}
	acked := time.Now()
	var cs []*core.Claim
	for len(cs) == 0 {
		if time.Since(acked) > 10*time.Second {
			t.Fatal("the primary's exclusive batch was never handed out after the old one finished")
		}
		cs = fetchD()
		time.Sleep(10 * time.Millisecond)
	}
	if waited := time.Since(acked); waited < settle {
		t.Fatalf("the primary's exclusive batch was handed out %v after the old backend emptied; want at least its settle window %v", waited, settle)
	}
}

// Exclusive clearance is re-read before the primary's first claim of the queue: a node on
// the old setting that published and claimed a batch of the queue after the drain node saw
// the old backend empty still keeps the primary's batch waiting.
func TestExclusiveClearanceRecheckedBeforeFirstPrimaryClaim(t *testing.T) {
	t.Parallel()
	primary, old := newMemory(t), newMemory(t)
	d := drain.New(primary, []core.Backend{&counting{Backend: old}}, &drain.Options{Logger: txmqtest.DiscardLogger(), CheckInterval: 50 * time.Millisecond})
	slot := core.QueueSlots{Queue: "x", Free: 1, Exclusive: true}
	if cs := fetch(t, d, slot); len(cs) != 0 { // both empty: the old backend clears x
		t.Fatalf("got %d claims from empty backends", len(cs))
	}
	publish(t, old, rawBatch("x", true, "late-old"))
	elsewhere := fetch(t, old, slot)
	if len(elsewhere) != 1 {
		t.Fatalf("old fetch: %d claims", len(elsewhere))
	}
	publish(t, primary, rawBatch("x", true, "new"))
	time.Sleep(60 * time.Millisecond) // the clearance is older than CheckInterval
	if cs := fetch(t, d, slot); len(cs) != 0 {
		t.Fatal("the primary's first exclusive batch was handed out on a stale clearance, while an old batch runs elsewhere")
	}
	if err := old.Ack(context.Background(), elsewhere[0]); err != nil {
		t.Fatal(err)
	}
	if cs := fetch(t, d, slot); len(cs) != 1 {
		t.Fatalf("after the old batch finished, want the primary's batch; got %d claims", len(cs))
	}
}

// A node whose only queue is an exclusive queue gated by an old backend (a batch of it runs
// elsewhere) does not spin: its Fetch waits a little instead of asking the old backend again
// and again.
func TestGatedExclusiveDoesNotSpin(t *testing.T) {
	t.Parallel()
	primary, oldMem := newMemory(t), newMemory(t)
	old := &counting{Backend: oldMem}
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "x", txmq.QueueConfig[string]{Transactional: txmq.Never, Exclusive: true})
	publish(t, oldMem, rawBatch("x", true, "old"))
	if cs := fetch(t, oldMem, core.QueueSlots{Queue: "x", Free: 1, Exclusive: true}); len(cs) != 1 {
		t.Fatalf("old fetch: %d claims", len(cs))
	}
	d := drain.New(primary, []core.Backend{old}, &drain.Options{Logger: txmqtest.DiscardLogger()})
	node := txmqtest.StartNode(t, d, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger(), PollWait: 5 * time.Second})
	if err := q.Listen(node, func(context.Context, []string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if calls := old.fetches.Load() + old.depths.Load(); calls > 12 {
		t.Fatalf("the old backend was asked %d times in 2 s while the exclusive queue was gated; want a few (about two a second)", calls)
	}
}
