package memory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// inspect returns the stored batches of queue by id.
func inspect(t *testing.T, be *Backend, queue string) map[string]core.StoredBatch {
	t.Helper()
	out := map[string]core.StoredBatch{}
	must(t, be.InspectBatches(context.Background(), []string{queue}, func(b core.StoredBatch) bool {
		out[b.ID] = b
		return true
	}))
	return out
}

func holds(t *testing.T, be *Backend, queue, key string) bool {
	t.Helper()
	h, err := be.HoldsKey(context.Background(), queue, key)
	must(t, err)
	return h
}

// TestOrderedCancel: batches held behind their key's head are inspected (delayed, with their
// own due time) and edited; removing a head makes the key's next batch due (a claimed one is
// not removable), removing a held batch keeps the others in order, and a key whose batches are
// all removed is no longer held, its lane forgotten.
func TestOrderedCancel(t *testing.T) {
	t.Parallel()
	be, clk := newFake(t)
	ctx := context.Background()
	for _, id := range []string{"a1", "a2", "a3", "a4"} {
		publishKeyed(t, be, "q", id, "a", 0)
	}
	publishKeyed(t, be, "q", "b1", "b", 5*time.Second)
	publishKeyed(t, be, "q", "b2", "b", 7*time.Second)
	due := clk.Now().Add(5 * time.Second)

	got := inspect(t, be, "q")
	if len(got) != 6 {
		t.Fatalf("InspectBatches found %d batches; want all 6 (heads and held ones)", len(got))
	}
	for id, want := range map[string]core.StoredBatch{
		"a1": {State: core.BatchReady},
		"a2": {State: core.BatchDelayed},
		"a4": {State: core.BatchDelayed},
		"b1": {State: core.BatchDelayed, Due: due},
		"b2": {State: core.BatchDelayed, Due: due.Add(2 * time.Second)},
	} {
		if b := got[id]; b.State != want.State || !b.Due.Equal(want.Due) || string(b.Body) != id {
			t.Errorf("batch %s: %+v; want state %v, due %v and its body", id, b, want.State, want.Due)
		}
	}

	must(t, be.ReplaceBatch(ctx, "q", "a3", []byte("a3-new"))) // held: body replaced in place
	must(t, be.ReplaceBatch(ctx, "q", "a1", nil))              // the ready head: a2 becomes due
	if d := depth(t, be, "q"); d.Ready != 1 || d.Delayed != 4 {
		t.Fatalf("after removing a's head, depth = %+v; want 1 ready (a2), 4 delayed (a3, a4 held; b1 not due, b2 held)", d)
	}
	cs := fetch(t, be, all("q"))
	if len(cs) != 1 || cs[0].ID != "a2" {
		t.Fatalf("after removing a's head got %v; want a2", ids(cs))
	}
	if err := be.ReplaceBatch(ctx, "q", "a2", nil); !errors.Is(err, core.ErrNotCancellable) {
		t.Fatalf("removing the claimed head: %v; want ErrNotCancellable", err)
	}
	must(t, be.ReplaceBatch(ctx, "q", "a4", nil)) // the held tail
	must(t, be.Ack(ctx, cs[0]))
	cs = fetch(t, be, all("q"))
	if len(cs) != 1 || cs[0].ID != "a3" || string(cs[0].Body) != "a3-new" {
		t.Fatalf("after acking a2 got %v; want a3 with its replaced body", ids(cs))
	}
	must(t, be.Ack(ctx, cs[0]))
	if holds(t, be, "q", "a") {
		t.Fatalf("HoldsKey(a) = true after every batch of a was acked or removed")
	}
	if err := be.ReplaceBatch(ctx, "q", "a1", nil); !errors.Is(err, core.ErrMessageNotFound) {
		t.Fatalf("removing a removed batch: %v; want ErrMessageNotFound", err)
	}

	must(t, be.ReplaceBatch(ctx, "q", "b2", nil)) // held behind a delayed head
	must(t, be.ReplaceBatch(ctx, "q", "b1", nil)) // the delayed head, now alone
	if holds(t, be, "q", "b") {
		t.Fatalf("HoldsKey(b) = true after both batches of b were removed")
	}
	if d := depth(t, be, "q"); d != (core.Depth{}) {
		t.Fatalf("depth = %+v; want empty", d)
	}
	be.mu.Lock()
	lanes, held := len(be.queues["q"].lanes), be.queues["q"].held
	be.mu.Unlock()
	if lanes != 0 || held != 0 {
		t.Fatalf("%d lanes and %d held batches left; want none", lanes, held)
	}
}

// TestOrderedCancelWakes: removing a key's head wakes a fetch waiting on the queue, which
// claims the key's next batch at once.
func TestOrderedCancelWakes(t *testing.T) {
	t.Parallel()
	be := newReal(t)
	publishKeyed(t, be, "q", "h1", "k", time.Hour)
	publishKeyed(t, be, "q", "h2", "k", 0)
	got := make(chan []*core.Claim, 1)
	go func() {
		cs, _ := be.Fetch(context.Background(), core.FetchRequest{Node: "n1", Queues: []core.QueueSlots{all("q")}, Lease: 10 * time.Second, Wait: 10 * time.Second})
		got <- cs
	}()
	waitForWaiters(t, be, "q", 1)
	start := time.Now()
	must(t, be.ReplaceBatch(context.Background(), "q", "h1", nil))
	cs := <-got
	if len(cs) != 1 || cs[0].ID != "h2" {
		t.Fatalf("the waiting fetch got %v; want h2", ids(cs))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the waiting fetch returned %v after the head was removed; want at once", took)
	}
}
