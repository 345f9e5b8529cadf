package sqljobs

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestExclusiveWaiterWokenByRelease: a node waiting on a held Exclusive queue is woken by the
// holder's Ack, not at the end of its wait.
func TestExclusiveWaiterWokenByRelease(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.backend(nil), w.backend(nil)
	publishN(t, a, "ex", 2)
	held := fetch(t, a, 10*time.Second, excl("ex"))
	if len(held) != 1 {
		t.Fatal("no claim")
	}
	done := make(chan time.Time, 1)
	go func() {
		cs, err := b.Fetch(context.Background(), core.FetchRequest{Node: "b", Queues: []core.QueueSlots{excl("ex")}, Lease: 10 * time.Second, Wait: 10 * time.Second})
		if err != nil || len(cs) != 1 {
			t.Errorf("waiting fetch: %d, %v", len(cs), err)
		}
		done <- time.Now()
	}()
	time.Sleep(300 * time.Millisecond)
	acked := time.Now()
	if err := a.Ack(ctxT(t), held[0]); err != nil {
		t.Fatal(err)
	}
	if d := (<-done).Sub(acked); d > 2*time.Second {
		t.Fatalf("waiting node took %v after the release", d)
	}
}
