package memory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestExpediteBatch: a delayed batch becomes claimable at once with its new body; a batch
// held behind its key's head gets its own due time now and still waits for the key; a
// claimed batch is refused (ErrNotCancellable) and a missing one is not found.
func TestExpediteBatch(t *testing.T) {
	t.Parallel()
	be, clk := newFake(t)
	ctx := context.Background()
	must(t, be.Publish(ctx, core.OutgoingBatch{ID: "later", Queue: "q", Body: []byte("old"), Delay: time.Hour}))
	publishKeyed(t, be, "q", "k1", "acct", time.Hour)
	publishKeyed(t, be, "q", "k2", "acct", time.Hour)
	if cs := fetch(t, be, all("q")); len(cs) != 0 {
		t.Fatalf("claimed %d batches before any is due", len(cs))
	}
	must(t, be.ExpediteBatch(ctx, "q", "later", []byte("new")))
	must(t, be.ExpediteBatch(ctx, "q", "k2", []byte("k2")))
	cs := fetch(t, be, all("q"))
	if len(cs) != 1 || cs[0].ID != "later" || string(cs[0].Body) != "new" {
		t.Fatalf("claimed %v; want only the expedited batch, with its new body (k2 waits behind k1)", ids(cs))
	}
	if b := inspect(t, be, "q")["k2"]; b.State != core.BatchDelayed || !b.Due.Equal(clk.Now()) {
		t.Errorf("k2 after expedite: %+v; want held, due now", b)
	}
	if err := be.ExpediteBatch(ctx, "q", "later", []byte("x")); !errors.Is(err, core.ErrNotCancellable) {
		t.Errorf("expediting a claimed batch: %v; want ErrNotCancellable", err)
	}
	if err := be.ExpediteBatch(ctx, "q", "nosuch", []byte("x")); !errors.Is(err, core.ErrMessageNotFound) {
		t.Errorf("expediting a missing batch: %v; want ErrMessageNotFound", err)
	}
	must(t, be.ExpediteBatch(ctx, "q", "k1", []byte("k1")))
	if cs := fetch(t, be, all("q")); len(cs) != 1 || cs[0].ID != "k1" {
		t.Fatalf("after expediting the key's head, claimed %v; want k1 only", ids(cs))
	}
}
