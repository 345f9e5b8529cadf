package sqljobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestExpediteBatch: a delayed row becomes claimable at once with its new body; a held row
// of an ordering key gets its own due time now and still waits for its key; a claimed row is
// refused (ErrNotCancellable) and a missing one is not found.
func TestExpediteBatch(t *testing.T) {
	t.Parallel()
	be := newWorld(t).backend(nil)
	ctx := context.Background()
	publish(t, be, "q", "later", time.Now().Add(time.Hour))
	for _, id := range []string{"k1", "k2"} {
		if err := be.Publish(ctx, core.OutgoingBatch{ID: id, Queue: "q", Key: "acct", Body: []byte(id), Messages: 1, Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if cs := fetch(t, be, time.Minute, all("q")); len(cs) != 0 {
		t.Fatalf("claimed %d batches before any is due", len(cs))
	}
	if err := be.ExpediteBatch(ctx, "q", "later", []byte("new body")); err != nil {
		t.Fatal(err)
	}
	if err := be.ExpediteBatch(ctx, "q", "k2", []byte("k2")); err != nil {
		t.Fatal(err)
	}
	cs := fetch(t, be, time.Minute, all("q"))
	if len(cs) != 1 || cs[0].ID != "later" || string(cs[0].Body) != "new body" {
		t.Fatalf("claimed %+v; want only the expedited row, with its new body (k2 waits behind k1)", cs)
	}
	if b := inspect(t, be, "q")["k2"]; b.State != core.BatchDelayed {
		t.Errorf("k2 after expedite: %+v; want still held behind k1", b)
	}
	if err := be.ExpediteBatch(ctx, "q", "later", []byte("x")); !errors.Is(err, core.ErrNotCancellable) {
		t.Errorf("expediting a claimed row: %v; want ErrNotCancellable", err)
	}
	if err := be.ExpediteBatch(ctx, "q", "nosuch", []byte("x")); !errors.Is(err, core.ErrMessageNotFound) {
		t.Errorf("expediting a missing row: %v; want ErrMessageNotFound", err)
	}
}
