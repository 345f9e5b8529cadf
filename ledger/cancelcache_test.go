package ledger

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestCancelFirstReadShared: a node's first claims, which come together, wait for the reader's
// first read instead of each asking the table, and see a cancel made before.
func TestCancelFirstReadShared(t *testing.T) {
	t.Parallel()
	l, _ := newTestLedger(t, &Options{NoPrune: true})
	ctx := context.Background()
	id := core.NewID()
	l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: "b", IDs: []string{id}, State: core.StateQueued, UpdatedAt: time.Now()})
	if _, err := l.CancelMessage(ctx, id); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := l.CancelledMessages(ctx, core.CancelCheck{Queue: "q", BatchID: "b", IDs: []string{id, core.NewID()}})
			if err != nil || len(got) != 1 || !got[id] {
				t.Errorf("CancelledMessages = %v, %v; want the cancelled one", got, err)
			}
		}()
	}
	wg.Wait()
	if n := l.cancels.asked.Load(); n != 0 {
		t.Errorf("%d of 50 first calls asked the table; want 0 (they wait for the first read)", n)
	}
}
