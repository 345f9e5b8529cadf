package sqljobs

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestDedupIDsHeldThenPruned: ids held by a publish refuse a second publish of any of them
// (naming those ids, storing nothing) until the window passes; the reaper then deletes the
// expired rows in pages of ReapBatch.
func TestDedupIDsHeldThenPruned(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(&Options{ReapBatch: 2})
	ctx := context.Background()
	pub := func(id string, window time.Duration, ids ...string) error {
		return be.Publish(ctx, core.OutgoingBatch{ID: id, Queue: "q", Body: []byte("{}"), Messages: len(ids), DedupWindow: window, DedupIDs: ids})
	}
	if err := pub("b1", time.Hour, "a", "b"); err != nil {
		t.Fatal(err)
	}
	err := pub("b2", time.Hour, "c", "b")
	var dup *core.DuplicateError
	if !errors.As(err, &dup) || !slices.Equal(dup.IDs, []string{"b"}) || dup.Queue != "q" {
		t.Fatalf("second publish of id b: %v; want a DuplicateError naming b", err)
	}
	if err := pub("b3", 50*time.Millisecond, "c", "d", "e"); err != nil {
		t.Fatalf("id c was recorded by the refused publish: %v", err)
	}
	if d, err := be.Depths(ctx, []string{"q"}); err != nil || d["q"].Ready != 2 {
		t.Fatalf("depths %+v, %v; want the 2 stored batches", d, err)
	}
	time.Sleep(100 * time.Millisecond) // c, d, e expire (a lower bound, not an assertion on speed)
	res, err := be.Reap(ctxT(t))
	if err != nil || res.ExpiredIDs != 3 {
		t.Fatalf("reap = %+v, %v; want 3 expired ids deleted", res, err)
	}
	if err := pub("b4", time.Hour, "c"); err != nil {
		t.Fatalf("id c after its window: %v", err)
	}
}
