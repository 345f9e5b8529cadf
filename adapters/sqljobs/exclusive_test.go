package sqljobs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestExclusiveAcrossNodes: three Backends on separate pools (three "nodes") fetch one
// Exclusive queue concurrently, each as fast as it can; at most one batch is ever in flight
// in the cluster, and every batch is processed.
func TestExclusiveAcrossNodes(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	nodes := []*Backend{w.backend(nil), w.backend(nil), w.backend(nil)}
	const total = 30
	publishN(t, nodes[0], "ex", total)
	var (
		inflight, peak, done atomic.Int64
		wg                   sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, be := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < total && ctx.Err() == nil {
				cs, err := be.Fetch(ctx, core.FetchRequest{Node: string(rune('a' + i)), Queues: []core.QueueSlots{excl("ex")}, Lease: 5 * time.Second, Wait: 100 * time.Millisecond})
				if err != nil {
					t.Errorf("node %d fetch: %v", i, err)
					return
				}
				if len(cs) > 1 {
					t.Errorf("node %d got %d claims of an Exclusive queue in one fetch", i, len(cs))
				}
				for _, c := range cs {
					n := inflight.Add(1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					time.Sleep(5 * time.Millisecond)
					inflight.Add(-1) // before the ack: the lock is released by the ack
					if err := be.Ack(ctx, c); err != nil {
						t.Errorf("node %d ack: %v", i, err)
					}
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if done.Load() != total {
		t.Fatalf("processed %d of %d", done.Load(), total)
	}
	if p := peak.Load(); p != 1 {
		t.Fatalf("peak in flight across nodes = %d, want 1", p)
	}
}

// TestExclusiveReleasedOnSettleAndExpiry: the lock holds against another node while the lease
// runs (and while it is extended), and goes with Retry, Drop and lease expiry.
func TestExclusiveReleasedOnSettleAndExpiry(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.backend(nil), w.backend(nil)
	publishN(t, a, "ex", 4)
	lease := 500 * time.Millisecond

	c1 := fetch(t, a, lease, excl("ex"))
	if len(c1) != 1 {
		t.Fatalf("first claim: %d", len(c1))
	}
	if cs := fetch(t, b, lease, excl("ex")); len(cs) != 0 {
		t.Fatal("second node claimed while the first holds the queue")
	}
	if err := a.Extend(ctxT(t), c1[0], 2*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(lease + 200*time.Millisecond)
	if cs := fetch(t, b, lease, excl("ex")); len(cs) != 0 {
		t.Fatal("claimed while the holder's extended lease still runs")
	}
	// Retry releases it.
	if err := a.Retry(ctxT(t), c1[0], []byte("again"), time.Hour); err != nil {
		t.Fatal(err)
	}
	c2 := fetch(t, b, lease, excl("ex"))
	if len(c2) != 1 {
		t.Fatal("lock not released by Retry")
	}
	// Drop releases it.
	if err := b.Drop(ctxT(t), c2[0], core.ReasonDeliveryExhausted); err != nil {
		t.Fatal(err)
	}
	c3 := fetch(t, a, lease, excl("ex"))
	if len(c3) != 1 {
		t.Fatal("lock not released by Drop")
	}
	// Expiry releases it (to any due batch of the queue; the old holder has lost its lease).
	time.Sleep(lease + 100*time.Millisecond)
	c4 := fetch(t, b, 10*time.Second, excl("ex"))
	if len(c4) != 1 {
		t.Fatal("lock not released by lease expiry")
	}
	if err := a.Ack(ctxT(t), c3[0]); !errors.Is(err, core.ErrLeaseLost) {
		t.Fatalf("expired holder's ack: %v, want ErrLeaseLost", err)
	}
	if cs := fetch(t, a, lease, excl("ex")); len(cs) != 0 {
		t.Fatal("claimed while the new holder's lease runs")
	}
	// Ack releases it.
	if err := b.Ack(ctxT(t), c4[0]); err != nil {
		t.Fatal(err)
	}
	if cs := fetch(t, a, lease, excl("ex")); len(cs) != 1 {
		t.Fatal("lock not released by Ack")
	}
}

// TestExclusiveWaiterWokenByRelease: a node waiting on a held Exclusive queue is woken by the
// holder's Ack, not at the end of its wait.
func TestExclusiveWaiterWokenByRelease(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.backend(nil), w.backend(nil)
	publishN(t, a, "ex", 2)
	held := fetch(t, a, 10*time.Second, excl("ex"))
	if len(held) != 1 {
		t.Fatal("no claim")
	}
	done := make(chan time.Time, 1)
	go func() {
		cs, err := b.Fetch(context.Background(), core.FetchRequest{Node: "b", Queues: []core.QueueSlots{excl("ex")}, Lease: 10 * time.Second, Wait: 10 * time.Second})
		if err != nil || len(cs) != 1 {
			t.Errorf("waiting fetch: %d, %v", len(cs), err)
		}
		done <- time.Now()
	}()
	time.Sleep(300 * time.Millisecond)
	acked := time.Now()
	if err := a.Ack(ctxT(t), held[0]); err != nil {
		t.Fatal(err)
	}
	if d := (<-done).Sub(acked); d > 2*time.Second {
		t.Fatalf("waiting node took %v after the release", d)
	}
}
