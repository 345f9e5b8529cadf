package redis

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

const shortLease = 200 * time.Millisecond

func TestLeaseExpiryRedelivers(t *testing.T) {
	t.Parallel()
	// Long enough that the checks "under lease" (one fetch, one depth) finish
	// inside it on a loaded -race CI machine; shortLease (200 ms) was not.
	const shortLease = time.Second
	a := newTestBackend(t, "", nil)
	b := newTestBackend(t, a.Prefix(), nil) // another node takes it over
	publish(t, a, "q", "b1", time.Time{})
	for want := 1; want <= 3; want++ {
		node := a
		if want%2 == 0 {
			node = b
		}
		handedOut := time.Now()
		cs := fetchLease(t, node, shortLease, all("q"))
		if len(cs) != 1 || cs[0].Deliveries != want {
			t.Fatalf("handout %d: got %d claims (%+v), want one with Deliveries %d", want, len(cs), cs, want)
		}
		if n := len(fetchLease(t, b, shortLease, all("q"))); n != 0 {
			t.Fatalf("claimed %d before the lease ended", n)
		}
		if d := depth(t, a, "q"); d != (core.Depth{InFlight: 1}) {
			t.Fatalf("depth under lease = %+v", d)
		}
		// The lease runs from the server's claim, which a loaded machine may make well after
		// handedOut: wait for the batch to be ready again rather than for a fixed time.
		time.Sleep(time.Until(handedOut.Add(shortLease)))
		deadline := time.Now().Add(10 * time.Second)
		for d := depth(t, a, "q"); d != (core.Depth{Ready: 1}); d = depth(t, a, "q") {
			if time.Now().After(deadline) {
				t.Fatalf("depth 10 s after the lease's end = %+v, want 1 ready", d)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestLeaseLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ops := map[string]func(be *Backend, c *core.Claim) error{
		"ack":    func(be *Backend, c *core.Claim) error { return be.Ack(ctx, c) },
		"drop":   func(be *Backend, c *core.Claim) error { return be.Drop(ctx, c, core.ReasonWorkerLost) },
		"retry":  func(be *Backend, c *core.Claim) error { return be.Retry(ctx, c, []byte("v2"), 0) },
		"extend": func(be *Backend, c *core.Claim) error { return be.Extend(ctx, c, time.Minute) },
	}
	be := newTestBackend(t, "", nil)
	for name, op := range ops {
		for _, reclaimed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/reclaimed=%v", name, reclaimed), func(t *testing.T) {
				t.Parallel()
				q := fmt.Sprintf("q-%s-%v", name, reclaimed)
				publish(t, be, q, "b1", time.Time{})
				stale := fetchLease(t, be, shortLease, one(q))[0]
				time.Sleep(shortLease + 20*time.Millisecond)
				var current *core.Claim
				if reclaimed {
					cs := fetch(t, be, one(q))
					if len(cs) != 1 {
						t.Fatalf("reclaim after expiry claimed %d", len(cs))
					}
					current = cs[0]
				}
				for i := range 2 {
					if err := op(be, stale); !errors.Is(err, core.ErrLeaseLost) {
						t.Fatalf("%s #%d on a lost lease: %v, want ErrLeaseLost", name, i+1, err)
					}
				}
				want := core.Depth{Ready: 1}
				if reclaimed {
					must(t, be.Ack(ctx, current))
					want = core.Depth{}
				}
				if d := depth(t, be, q); d != want {
					t.Fatalf("depth = %+v, want %+v: the stale settle must not touch the batch", d, want)
				}
			})
		}
	}
}
