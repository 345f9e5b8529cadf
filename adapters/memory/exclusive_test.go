package memory

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func excl(queue string) core.QueueSlots {
	return core.QueueSlots{Queue: queue, Free: core.Unlimited, Exclusive: true}
}

// TestExclusivePeakOne runs several fetchers, as several nodes sharing the backend would, and
// checks that at most one batch of the exclusive queue is ever in flight (TRAPS 10).
func TestExclusivePeakOne(t *testing.T) {
	t.Parallel()
	be := newReal(t)
	const batches, nodes = 60, 4
	publishN(t, be, "x", batches)
	publishN(t, be, "free", batches) // a non-exclusive queue in the same requests is not limited

	var running, peak, done, freeDone atomic.Int64
	var wg sync.WaitGroup
	for n := range nodes {
		wg.Go(func() {
			ctx := context.Background()
			for done.Load() < batches {
				cs, err := be.Fetch(ctx, core.FetchRequest{
					Node: "node" + string(rune('a'+n)), Lease: time.Minute, Wait: 20 * time.Millisecond,
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
					if now := running.Add(1); now > peak.Load() {
						peak.Store(now) // racy max is fine: any value above 1 fails
					}
					time.Sleep(100 * time.Microsecond) // hold the claim while others fetch
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
	if freeDone.Load() != batches {
		t.Fatalf("non-exclusive queue: %d of %d batches done", freeDone.Load(), batches)
	}
}

func TestExclusiveReleased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name    string
		release func(t *testing.T, be *Backend, clk *fakeClock, c *core.Claim)
	}{
		{name: "ack", release: func(t *testing.T, be *Backend, _ *fakeClock, c *core.Claim) { must(t, be.Ack(ctx, c)) }},
		{name: "drop", release: func(t *testing.T, be *Backend, _ *fakeClock, c *core.Claim) {
			must(t, be.Drop(ctx, c, core.ReasonDeliveryExhausted))
		}},
		{name: "retry", release: func(t *testing.T, be *Backend, _ *fakeClock, c *core.Claim) {
			must(t, be.Retry(ctx, c, []byte("v2"), time.Hour))
		}},
		{name: "lease expiry", release: func(t *testing.T, be *Backend, clk *fakeClock, c *core.Claim) {
			clk.Advance(10 * time.Second)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			be, clk := newFake(t)
			publishN(t, be, "x", 3)
			first := fetch(t, be, excl("x"))
			if len(first) != 1 {
				t.Fatalf("first fetch claimed %d, want 1", len(first))
			}
			if cs := fetch(t, be, excl("x")); len(cs) != 0 {
				t.Fatalf("claimed %d while another claim of the exclusive queue is held", len(cs))
			}
			tt.release(t, be, clk, first[0])
			if cs := fetch(t, be, excl("x")); len(cs) != 1 {
				t.Fatalf("after %s claimed %d, want 1", tt.name, len(cs))
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
