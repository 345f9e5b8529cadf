package sqljobs

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// inspect returns the stored batches of queue by id.
func inspect(t *testing.T, be *Backend, queue string) map[string]core.StoredBatch {
	t.Helper()
	out := map[string]core.StoredBatch{}
	err := be.InspectBatches(context.Background(), []string{queue}, func(b core.StoredBatch) bool {
		if _, dup := out[b.ID]; dup {
			t.Errorf("batch %s reported twice", b.ID)
		}
		out[b.ID] = b
		return true
	})
	if err != nil {
		t.Fatalf("InspectBatches: %v", err)
	}
	return out
}

// TestInspectBatches: every stored batch is reported once, across pages, with its state (a
// held row of an ordering key counts as delayed), due time, deliveries and body; a nil queue
// list finds the queues; fn returning false stops the walk.
func TestInspectBatches(t *testing.T) {
	t.Parallel()
	be := newWorld(t).backend(nil)
	ctx := context.Background()
	publishN(t, be, "many", inspectPage*2+7)
	publish(t, be, "q", "ready", time.Time{})
	due := time.Now().Add(time.Hour)
	publish(t, be, "q", "delayed", due)
	publish(t, be, "q", "running", time.Time{})
	for _, id := range []string{"k1", "k2"} {
		if err := be.Publish(ctx, core.OutgoingBatch{ID: id, Queue: "q", Key: "acct", Body: []byte(id), Messages: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(inspect(t, be, "many")); got != inspectPage*2+7 {
		t.Fatalf("paged walk reported %d batches, want %d", got, inspectPage*2+7)
	}
	// Claim "ready", "running" and "k1" in one go, then put "ready" back as a retry that is due.
	cs := fetch(t, be, time.Minute, all("q"))
	if len(cs) != 3 {
		t.Fatalf("claimed %d, want 3 (ready, running, k1)", len(cs))
	}
	for _, c := range cs {
		if c.ID == "ready" {
			if err := be.Retry(ctx, c, nil, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := inspect(t, be, "q")
	want := map[string]core.BatchState{"ready": core.BatchReady, "delayed": core.BatchDelayed, "running": core.BatchInFlight, "k1": core.BatchInFlight, "k2": core.BatchDelayed}
	if len(got) != len(want) {
		t.Fatalf("reported %d batches (%v), want %d", len(got), got, len(want))
	}
	for id, st := range want {
		if got[id].State != st || got[id].Queue != "q" {
			t.Errorf("%s: %+v, want state %v", id, got[id], st)
		}
	}
	if d := got["delayed"].Due; d.Before(due.Add(-time.Second)) || d.After(due.Add(time.Second)) {
		t.Errorf("delayed batch's Due = %v, want about %v", d, due)
	}
	if got["running"].Deliveries != 1 || string(got["k2"].Body) != "k2" {
		t.Errorf("running %+v, k2 %+v", got["running"], got["k2"])
	}
	queues := map[string]bool{}
	n := 0
	if err := be.InspectBatches(ctx, nil, func(b core.StoredBatch) bool { queues[b.Queue] = true; n++; return n < inspectPage+1 }); err != nil {
		t.Fatal(err)
	}
	if n != inspectPage+1 || !queues["many"] {
		t.Errorf("nil queues walk stopped after %d (queues %v), want %d starting with many", n, queues, inspectPage+1)
	}
}

// TestReplaceBatch: an unclaimed batch's body is replaced or the batch removed; a running one
// is refused with ErrNotCancellable and a gone one with ErrMessageNotFound; removing the head
// of an ordering key lets the key's next batch run.
func TestReplaceBatch(t *testing.T) {
	t.Parallel()
	be := newWorld(t).backend(nil)
	ctx := context.Background()
	publish(t, be, "q", "a", time.Time{})
	publish(t, be, "q", "b", time.Now().Add(time.Hour))
	if err := be.ReplaceBatch(ctx, "q", "a", []byte("new")); err != nil {
		t.Fatalf("replace: %v", err)
	}
	if err := be.ReplaceBatch(ctx, "q", "b", nil); err != nil {
		t.Fatalf("remove: %v", err)
	}
	cs := fetch(t, be, time.Minute, all("q"))
	if len(cs) != 1 || string(cs[0].Body) != "new" {
		t.Fatalf("after replace and remove: %d claims %v, want a with the new body", len(cs), cs)
	}
	if err := be.ReplaceBatch(ctx, "q", "a", nil); !errors.Is(err, core.ErrNotCancellable) {
		t.Fatalf("remove of a running batch: %v, want ErrNotCancellable", err)
	}
	if err := be.ReplaceBatch(ctx, "q", "b", nil); !errors.Is(err, core.ErrMessageNotFound) {
		t.Fatalf("remove of a removed batch: %v, want ErrMessageNotFound", err)
	}
	for i := range 3 {
		id := fmt.Sprintf("k%d", i)
		if err := be.Publish(ctx, core.OutgoingBatch{ID: id, Queue: "o", Key: "acct", Body: []byte(id), Messages: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := be.ReplaceBatch(ctx, "o", "k1", nil); err != nil { // held behind k0
		t.Fatalf("remove of a held batch: %v", err)
	}
	if err := be.ReplaceBatch(ctx, "o", "k0", nil); err != nil { // the head
		t.Fatalf("remove of the key's head: %v", err)
	}
	cs = fetch(t, be, time.Minute, all("o"))
	if len(cs) != 1 || cs[0].ID != "k2" {
		t.Fatalf("after removing k0 and k1: %v, want k2 due", cs)
	}
}
