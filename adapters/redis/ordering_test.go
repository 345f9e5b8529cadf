package redis

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

func claimIDs(cs []*core.Claim) map[string]*core.Claim {
	m := map[string]*core.Claim{}
	for _, c := range cs {
		m[c.ID] = c
	}
	return m
}

// TestOrderedLists: only a key's first batch is claimable; a retry keeps it first, an ack or
// drop makes the next one due (a delayed one at its due time); held batches count as delayed
// and nothing of a key is left once it is done.
func TestOrderedLists(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, uniquePrefix(t), nil)
	ctx := context.Background()
	publishKeyed(t, be, "q", "a1", "a", 0)
	publishKeyed(t, be, "q", "a2", "a", time.Second)
	publishKeyed(t, be, "q", "b1", "b", 0)
	publishKeyed(t, be, "q", "a3", "a", 0)
	if d := depth(t, be, "q"); d.Ready != 2 || d.Delayed != 2 {
		t.Fatalf("depth %+v; want 2 ready (a1, b1), 2 delayed (a2, a3 held)", d)
	}
	got := claimIDs(fetchLease(t, be, 10*time.Second, all("q")))
	if len(got) != 2 || got["a1"] == nil || got["b1"] == nil {
		t.Fatalf("claimed %v; want a1 and b1", got)
	}
	must(t, be.Retry(ctx, got["a1"], nil, 0))
	must(t, be.Ack(ctx, got["b1"]))
	again := claimIDs(fetchLease(t, be, 10*time.Second, all("q")))
	if len(again) != 1 || again["a1"] == nil {
		t.Fatalf("after a retry claimed %v; want a1 again", again)
	}
	must(t, be.Ack(ctx, again["a1"]))
	if cs := fetchLease(t, be, 10*time.Second, all("q")); len(cs) != 0 {
		t.Fatalf("claimed %v right after a1; want nothing (a2 is delayed 1s and a3 waits behind it)", claimIDs(cs))
	}
	time.Sleep(1100 * time.Millisecond)
	next := claimIDs(fetchLease(t, be, 10*time.Second, all("q")))
	if len(next) != 1 || next["a2"] == nil {
		t.Fatalf("claimed %v; want a2 once due", next)
	}
	must(t, be.Drop(ctx, next["a2"], core.ReasonDeliveryExhausted))
	last := claimIDs(fetchLease(t, be, 10*time.Second, all("q")))
	if len(last) != 1 || last["a3"] == nil {
		t.Fatalf("after dropping a2 claimed %v; want a3", last)
	}
	must(t, be.Ack(ctx, last["a3"]))
	k := be.keys.keys("q").script
	for _, name := range k[5:] {
		if n, err := be.rdb.Exists(ctx, name).Result(); err != nil || n != 0 {
			t.Errorf("%s still exists (%d, %v); want every ordering hash empty", name, n, err)
		}
	}
}
