package redis

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestInspectBatches: every queue under the prefix is found, and each batch is reported ready,
// delayed (with its due time) or in flight, with its body and Deliveries (1 for the batch in
// flight, whose dlv entry also holds its lease token; 0 for the others).
func TestInspectBatches(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, uniquePrefix(t), nil)
	publish(t, be, "qa", "ready", time.Time{})
	publish(t, be, "qa", "claimed", time.Time{})
	due := time.Now().Add(time.Hour)
	publish(t, be, "qb", "later", due)
	claims := fetchLease(t, be, time.Minute, core.QueueSlots{Queue: "qa", Free: 1})
	if len(claims) != 1 {
		t.Fatalf("fetched %d claims, want 1", len(claims))
	}
	got := map[string]core.StoredBatch{}
	if err := be.InspectBatches(context.Background(), nil, func(b core.StoredBatch) bool { got[b.ID] = b; return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("InspectBatches found %v; want 3 batches", got)
	}
	inflight := claims[0].ID
	for id, b := range got {
		want, dlv := core.BatchReady, 0
		switch id {
		case inflight:
			want, dlv = core.BatchInFlight, 1
		case "later":
			want = core.BatchDelayed
			if b.Due.Sub(due).Abs() > 5*time.Second || b.Queue != "qb" {
				t.Errorf("delayed batch: %+v; want queue qb due about %v", b, due)
			}
		}
		if b.State != want || string(b.Body) != "body-"+id || b.Deliveries != dlv {
			t.Errorf("batch %s: state %v body %q deliveries %d; want state %v body %q deliveries %d", id, b.State, b.Body, b.Deliveries, want, "body-"+id, dlv)
		}
	}
	n := 0
	if err := be.InspectBatches(context.Background(), []string{"qb"}, func(core.StoredBatch) bool { n++; return true }); err != nil || n != 1 {
		t.Errorf("InspectBatches of qb: %d batches, %v; want 1", n, err)
	}
}

// TestInspectHeld: batches held behind the head of their ordering key (in no set) are reported
// delayed, as Depths counts them, with their own due time when it is ahead; the head is ready.
func TestInspectHeld(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, uniquePrefix(t), nil)
	publishKeyed(t, be, "q", "h1", "k", 0)
	publishKeyed(t, be, "q", "h2", "k", 0)
	publishKeyed(t, be, "q", "h3", "k", time.Hour)
	due := time.Now().Add(time.Hour)
	got := map[string]core.StoredBatch{}
	must(t, be.InspectBatches(context.Background(), []string{"q"}, func(b core.StoredBatch) bool { got[b.ID] = b; return true }))
	if b := got["h1"]; b.State != core.BatchReady {
		t.Errorf("the head h1: %+v; want ready", b)
	}
	if b := got["h2"]; b.State != core.BatchDelayed || !b.Due.IsZero() {
		t.Errorf("held h2: %+v; want delayed with no due time (published without a delay)", b)
	}
	if b := got["h3"]; b.State != core.BatchDelayed || b.Due.Sub(due).Abs() > 5*time.Second {
		t.Errorf("held h3: %+v; want delayed, due about %v", b, due)
	}
	if d := depth(t, be, "q"); d.Ready != 1 || d.Delayed != 2 {
		t.Errorf("depth = %+v; want 1 ready, 2 delayed (as InspectBatches reports them)", d)
	}
}
