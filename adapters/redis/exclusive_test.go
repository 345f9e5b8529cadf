package redis

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestExclusiveWakesWaiter: a fetch waiting on an exclusive queue held elsewhere wakes as soon
// as the holder settles, not at its Wait.
func TestExclusiveWakesWaiter(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	other := newTestBackend(t, be.Prefix(), nil)
	publishN(t, be, "x", 2)
	held := fetch(t, be, excl("x"))[0]
	got := make(chan time.Time, 1)
	go func() {
		cs, err := other.Fetch(context.Background(), core.FetchRequest{Node: "o", Queues: []core.QueueSlots{excl("x")}, Lease: 10 * time.Second, Wait: 5 * time.Second})
		if err != nil || len(cs) != 1 {
			t.Errorf("waiting fetch: %d claims, %v", len(cs), err)
		}
		got <- time.Now()
	}()
	time.Sleep(100 * time.Millisecond)
	acked := time.Now()
	must(t, be.Ack(context.Background(), held))
	if lat := (<-got).Sub(acked); lat > 200*time.Millisecond {
		t.Fatalf("the waiting fetch took %v after the exclusive batch was settled", lat)
	}
}
