package redis

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestExclusivePeakOne runs three clients, as three nodes would, and checks that at most one
// batch of the exclusive queue is ever in flight across them (TRAPS 10), while a
// non-exclusive queue in the same requests is not limited.
func TestExclusivePeakOne(t *testing.T) {
	t.Parallel()
	first := newTestBackend(t, "", nil)
	nodes := []*Backend{first, newTestBackend(t, first.Prefix(), nil), newTestBackend(t, first.Prefix(), nil)}
	const batches = 40
	publishN(t, first, "x", batches)
	publishN(t, first, "free", batches)

	var running, peak, done, freeDone atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(20 * time.Second)
	for i, be := range nodes {
		wg.Go(func() {
			ctx := context.Background()
			for done.Load() < batches && time.Now().Before(deadline) {
				cs, err := be.Fetch(ctx, core.FetchRequest{
					Node: "node" + string(rune('a'+i)), Lease: 5 * time.Second, Wait: 50 * time.Millisecond,
					Queues: []core.QueueSlots{excl("x"), all("free")},
				})
				if err != nil {
					t.Error(err)
					return
				}
				xs := 0
				for _, c := range cs {
					if c.Queue == "free" {
						freeDone.Add(1)
						if err := be.Ack(ctx, c); err != nil {
							t.Error(err)
						}
						continue
					}
					xs++
					now := running.Add(1)
					for {
						p := peak.Load()
						if now <= p || peak.CompareAndSwap(p, now) {
							break
						}
					}
					time.Sleep(2 * time.Millisecond) // hold the claim while others fetch
					running.Add(-1)
					if err := be.Ack(ctx, c); err != nil {
						t.Error(err)
					}
					done.Add(1)
				}
				if xs > 1 {
					t.Errorf("one fetch claimed %d batches of an exclusive queue", xs)
				}
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p != 1 {
		t.Fatalf("peak in-flight batches of the exclusive queue = %d, want 1", p)
	}
	if done.Load() != batches || freeDone.Load() != batches {
		t.Fatalf("done: exclusive %d, free %d, of %d each", done.Load(), freeDone.Load(), batches)
	}
}

func TestExclusiveReleased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name    string
		release func(t *testing.T, be *Backend, c *core.Claim)
	}{
		{name: "ack", release: func(t *testing.T, be *Backend, c *core.Claim) { must(t, be.Ack(ctx, c)) }},
		{name: "drop", release: func(t *testing.T, be *Backend, c *core.Claim) {
			must(t, be.Drop(ctx, c, core.ReasonDeliveryExhausted))
		}},
		{name: "retry", release: func(t *testing.T, be *Backend, c *core.Claim) {
			must(t, be.Retry(ctx, c, []byte("v2"), time.Hour))
		}},
		{name: "lease expiry", release: func(t *testing.T, be *Backend, c *core.Claim) {
			time.Sleep(shortLease + 20*time.Millisecond)
		}},
	}
	be := newTestBackend(t, "", nil)
	other := newTestBackend(t, be.Prefix(), nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := "x-" + tt.name[:2]
			publishN(t, be, q, 3)
			first := fetchLease(t, be, shortLease, excl(q))
			if len(first) != 1 {
				t.Fatalf("first fetch claimed %d, want 1", len(first))
			}
			if cs := fetch(t, other, excl(q)); len(cs) != 0 {
				t.Fatalf("claimed %d while another node holds a claim of the exclusive queue", len(cs))
			}
			tt.release(t, be, first[0])
			if cs := fetch(t, other, excl(q)); len(cs) != 1 {
				t.Fatalf("after %s claimed %d, want 1", tt.name, len(cs))
			}
		})
	}
}

// TestExclusiveWakesWaiter: a fetch waiting on an exclusive queue held elsewhere wakes as soon
// as the holder settles, not at its Wait.
func TestExclusiveWakesWaiter(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	other := newTestBackend(t, be.Prefix(), nil)
	publishN(t, be, "x", 2)
	held := fetch(t, be, excl("x"))[0]
	got := make(chan time.Time, 1)
	go func() {
		cs, err := other.Fetch(context.Background(), core.FetchRequest{Node: "o", Queues: []core.QueueSlots{excl("x")}, Lease: 10 * time.Second, Wait: 5 * time.Second})
		if err != nil || len(cs) != 1 {
			t.Errorf("waiting fetch: %d claims, %v", len(cs), err)
		}
		got <- time.Now()
	}()
	time.Sleep(100 * time.Millisecond)
	acked := time.Now()
	must(t, be.Ack(context.Background(), held))
	if lat := (<-got).Sub(acked); lat > 200*time.Millisecond {
		t.Fatalf("the waiting fetch took %v after the exclusive batch was settled", lat)
	}
}
