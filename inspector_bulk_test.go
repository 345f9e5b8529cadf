package txmq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

// TestInspectorCancelWhere: a bulk cancel by queue and state takes every selected message
// out (whole batches removed, a partly selected one edited) and leaves the others; it needs
// a queue and a waiting state, and says when the backend cannot cancel.
func TestInspectorCancelWhere(t *testing.T) {
	t.Parallel()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "bulkcancel", txmq.QueueConfig[string]{Transactional: txmq.Try})
	be := memory.New(nil)
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	ctx := context.Background()
	if err := q.PublishMany(ctx, n, []string{"a", "b"}, txmq.IDs("d-1", "d-2"), txmq.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(ctx, n, "c", txmq.ID("d-3"), txmq.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(ctx, n, "now", txmq.ID("r-1")); err != nil {
		t.Fatal(err)
	}
	in := n.Inspector()
	txmqtest.Eventually(t, 10*time.Second, func() bool {
		ms, err := in.List(ctx, txmq.MessageFilter{Queue: "bulkcancel"})
		return err == nil && len(ms) == 4
	}, "the 4 messages stored")
	res, err := in.CancelWhere(ctx, txmq.MessageFilter{Queue: "bulkcancel", State: core.StateDelayed})
	if err != nil || res != (txmq.BulkResult{Done: 3}) {
		t.Fatalf("CancelWhere(delayed) = %+v, %v; want 3 done", res, err)
	}
	if d, _ := be.Depths(ctx, []string{"bulkcancel"}); d["bulkcancel"].Ready != 1 || d["bulkcancel"].Delayed != 0 {
		t.Errorf("depths after the bulk cancel: %+v; want the ready batch only", d["bulkcancel"])
	}
	if m, err := in.Get(ctx, "r-1"); err != nil || m.State != core.StateQueued {
		t.Errorf("the queued message: %+v, %v; want it left", m, err)
	}
	for _, f := range []txmq.MessageFilter{{State: core.StateDelayed}, {Queue: "bulkcancel", State: core.StateRunning}, {Queue: "bulkcancel"}} {
		if _, err := in.CancelWhere(ctx, f); !errors.Is(err, txmq.ErrInvalidConfig) {
			t.Errorf("CancelWhere(%+v): %v; want ErrInvalidConfig", f, err)
		}
	}
	opq := txmq.NewInspector(nil, opaque{be})
	if err := opq.CanCancel(); !errors.Is(err, txmq.ErrLookupUnsupported) {
		t.Errorf("CanCancel on a backend without BatchEditor: %v", err)
	}
	if _, err := opq.CancelWhere(ctx, txmq.MessageFilter{Queue: "bulkcancel", State: core.StateQueued}); !errors.Is(err, txmq.ErrLookupUnsupported) {
		t.Errorf("CancelWhere on a backend without BatchEditor: %v", err)
	}
}
