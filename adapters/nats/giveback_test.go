package nats

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
)

// A stashed message that no Fetch takes (its queue's slots stay full) is given back when half
// its lease is gone, without counting the delivery: the next claim has Deliveries 1 and the
// whole body, chunked bodies included (the copy keeps the chunk references).
func TestStashGivenBackWithoutCount(t *testing.T) {
	t.Parallel()
	// The cancelled Fetch's pull stays outstanding for a quarter of the lease: 1 s leaves a
	// loaded machine room to publish both batches into it.
	lease := 4 * time.Second
	a := openBackend(t, natstest.NATSURL(t), &Options{ChunkSize: 1024})
	b := sibling(t, a)
	big := bytes.Repeat([]byte("x"), 3000) // three chunks
	fetchWait(t, a, 0, lease, all("q"))    // create the consumer
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the Fetch returns at once, its pull outstanding
	if _, err := a.Fetch(ctx, core.FetchRequest{Node: "n", Lease: lease, Wait: lease, Queues: []core.QueueSlots{all("q")}}); err != nil {
		t.Fatal(err)
	}
	publish(t, b, "q", "small", time.Time{})
	if err := b.Publish(context.Background(), core.OutgoingBatch{ID: "big", Queue: "q", Body: big}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both batches reach a's stash", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.queues["q"].stash) == 2
	})
	time.Sleep(lease + 200*time.Millisecond) // a never fetches again
	got := fetchN(t, b, 2, lease, all("q"))
	for _, c := range got {
		if c.Deliveries != 1 {
			t.Errorf("batch %s: Deliveries %d after a delivery that never ran; want 1", c.ID, c.Deliveries)
		}
		if c.ID == "big" && !bytes.Equal(c.Body, big) {
			t.Errorf("chunked batch: body of %d bytes, want %d", len(c.Body), len(big))
		}
		if err := b.Ack(context.Background(), c); err != nil {
			t.Errorf("ack %s: %v", c.ID, err)
		}
	}
}
