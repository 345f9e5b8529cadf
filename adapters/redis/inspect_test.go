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
