package memory

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func publishKeyed(t *testing.T, be *Backend, queue, id, key string, delay time.Duration) {
	t.Helper()
	must(t, be.Publish(context.Background(), core.OutgoingBatch{ID: id, Queue: queue, Body: []byte(id), Key: key, Delay: delay}))
}

func ids(cs []*core.Claim) map[string]bool {
	out := map[string]bool{}
	for _, c := range cs {
		out[c.ID] = true
	}
	return out
}

// TestOrderedLanes: only the head of a key is claimable; a retried or expired head stays first;
// an ack moves the key on; a delayed head holds back its key and nothing else; held batches
// count as delayed.
func TestOrderedLanes(t *testing.T) {
	t.Parallel()
	be, clk := newFake(t)
	ctx := context.Background()
	publishKeyed(t, be, "q", "a1", "a", 0)
	publishKeyed(t, be, "q", "a2", "a", 0)
	publishKeyed(t, be, "q", "b1", "b", 0)
	publishKeyed(t, be, "q", "c1", "c", 5*time.Second)
	publishKeyed(t, be, "q", "c2", "c", 0)
	publish(t, be, "q", "u1", time.Time{})
	if d := depth(t, be, "q"); d.Ready != 3 || d.Delayed != 3 {
		t.Fatalf("depth = %+v; want 3 ready (a1, b1, u1), 3 delayed (c1 due later, a2 and c2 held)", d)
	}
	cs := fetch(t, be, all("q"))
	if got := ids(cs); len(got) != 3 || !got["a1"] || !got["b1"] || !got["u1"] {
		t.Fatalf("first fetch got %v; want a1, b1, u1", got)
	}
	if cs := fetch(t, be, all("q")); len(cs) != 0 {
		t.Fatalf("second fetch got %v; want nothing (heads in flight, c1 not due)", ids(cs))
	}
	for _, c := range cs {
		switch c.ID {
		case "a1":
			must(t, be.Retry(ctx, c, nil, 0)) // stays the head of a
		default:
			must(t, be.Ack(ctx, c))
		}
	}
	cs = fetch(t, be, all("q"))
	if got := ids(cs); len(got) != 1 || !got["a1"] {
		t.Fatalf("after a retry of a1 got %v; want a1 again (head of line)", got)
	}
	clk.Advance(11 * time.Second) // a1's lease (10 s) runs out, and c1 is due
	cs = fetch(t, be, all("q"))
	if got := ids(cs); len(got) != 2 || !got["a1"] || !got["c1"] {
		t.Fatalf("after a1's lease expired got %v; want a1 (redelivered first) and c1 (due)", got)
	}
	for _, c := range cs {
		must(t, be.Ack(ctx, c))
	}
	cs = fetch(t, be, all("q"))
	if got := ids(cs); len(got) != 2 || !got["a2"] || !got["c2"] {
		t.Fatalf("after acking the heads got %v; want a2 and c2", got)
	}
	for _, c := range cs {
		must(t, be.Drop(ctx, c, core.ReasonDeliveryExhausted))
	}
	if d := depth(t, be, "q"); d != (core.Depth{}) {
		t.Fatalf("depth = %+v; want empty", d)
	}
	be.mu.Lock()
	lanes := len(be.queues["q"].lanes)
	be.mu.Unlock()
	if lanes != 0 {
		t.Fatalf("%d lanes left; want 0 (empty lanes are forgotten)", lanes)
	}
}

// TestOrdersKeys: the Backend declares the capability.
func TestOrdersKeys(t *testing.T) {
	t.Parallel()
	if err := core.OrdersKeys(newReal(t)); err != nil {
		t.Fatalf("OrdersKeys = %v; want nil", err)
	}
}
