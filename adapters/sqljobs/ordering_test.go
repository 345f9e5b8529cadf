package sqljobs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func publishKeyed(t testing.TB, be *Backend, queue, id, key string, delay time.Duration) {
	t.Helper()
	if err := be.Publish(context.Background(), core.OutgoingBatch{ID: id, Queue: queue, Body: []byte(`{}`), Key: key, Delay: delay}); err != nil {
		t.Fatalf("publish %s: %v", id, err)
	}
}

func claimIDs(cs []*core.Claim) map[string]*core.Claim {
	m := map[string]*core.Claim{}
	for _, c := range cs {
		m[c.ID] = c
	}
	return m
}

// TestOrderedRows: only the first row of a key is claimable; an ack makes the next due, a
// retry keeps the first first; held rows count as delayed.
func TestOrderedRows(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	ctx := ctxT(t)
	publishKeyed(t, be, "q", "a1", "a", 0)
	publishKeyed(t, be, "q", "a2", "a", 0)
	publishKeyed(t, be, "q", "b1", "b", 0)
	publishKeyed(t, be, "q", "a3", "a", 0)
	if d := depth(t, be, "q"); d.Ready != 2 || d.Delayed != 2 {
		t.Fatalf("depth %+v; want 2 ready (a1, b1), 2 delayed (a2, a3 held)", d)
	}
	got := claimIDs(fetch(t, be, 10*time.Second, all("q")))
	if len(got) != 2 || got["a1"] == nil || got["b1"] == nil {
		t.Fatalf("claimed %v; want a1 and b1", got)
	}
	if err := be.Retry(ctx, got["a1"], nil, 0); err != nil {
		t.Fatal(err)
	}
	again := claimIDs(fetch(t, be, 10*time.Second, all("q")))
	if len(again) != 1 || again["a1"] == nil {
		t.Fatalf("after a retry claimed %v; want a1 again", again)
	}
	if err := be.Ack(ctx, again["a1"]); err != nil {
		t.Fatal(err)
	}
	next := claimIDs(fetch(t, be, 10*time.Second, all("q")))
	if len(next) != 1 || next["a2"] == nil {
		t.Fatalf("after acking a1 claimed %v; want a2", next)
	}
	if err := be.Drop(ctx, next["a2"], core.ReasonDeliveryExhausted); err != nil {
		t.Fatal(err)
	}
	last := claimIDs(fetch(t, be, 10*time.Second, all("q")))
	if len(last) != 1 || last["a3"] == nil {
		t.Fatalf("after dropping a2 claimed %v; want a3", last)
	}
}

// TestOrderedRace: publishes of many keys racing the acks of their keys' first rows never
// leave a row held behind nothing: every batch is claimed, in order per key.
func TestOrderedRace(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	ctx := ctxT(t)
	const keys, per = 50, 6
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range per {
			for k := range keys {
				publishKeyed(t, be, "q", fmt.Sprintf("k%d-%d", k, i), fmt.Sprintf("k%d", k), 0)
			}
		}
	}()
	seen := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for done := 0; done < keys*per; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d batches claimed in 30s; per key: %v", done, keys*per, seen)
		}
		cs, err := be.Fetch(ctx, core.FetchRequest{Node: "n", Queues: []core.QueueSlots{all("q")}, Lease: 10 * time.Second, Wait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			var k, i int
			if _, err := fmt.Sscanf(c.ID, "k%d-%d", &k, &i); err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprintf("k%d", k)
			if seen[key] != i {
				t.Fatalf("key %s: claimed batch %d, want %d", key, i, seen[key])
			}
			seen[key]++
			done++
			if err := be.Ack(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
}
