package nats

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/testenv/natsenv"
)

// A stashed message that no Fetch takes (its queue's slots stay full) is given back when half
// its lease is gone, without counting the delivery: the next claim has Deliveries 1 and the
// whole body, chunked bodies included (the copy keeps the chunk references).
func TestStashGivenBackWithoutCount(t *testing.T) {
	t.Parallel()
	lease := 800 * time.Millisecond
	a := openBackend(t, natsenv.NATSURL(t), &Options{ChunkSize: 1024})
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

// A message delivered before its due time (the server's clock ahead of this client's) is not
// handed out early, and its early delivery is not counted.
func TestEarlyArrivalNotCounted(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natsenv.NATSURL(t), nil)
	q, err := be.queue(context.Background(), "publish", "q")
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(700 * time.Millisecond)
	hdr := natsgo.Header{}
	hdr.Set(hdrBatch, "early")
	hdr.Set(hdrNotBefore, strconv.FormatInt(due.UnixNano(), 10))
	if err := be.publish(context.Background(), q, &natsgo.Msg{Subject: q.ready, Header: hdr, Data: []byte("body")}); err != nil {
		t.Fatal(err)
	}
	c := fetchN(t, be, 1, time.Second, one("q"))[0]
	if now := time.Now(); now.Before(due) {
		t.Fatalf("claimed %v before its due time", due.Sub(now))
	}
	if c.ID != "early" || string(c.Body) != "body" || c.Deliveries != 1 {
		t.Fatalf("claim %s %q with Deliveries %d; want early \"body\" 1", c.ID, c.Body, c.Deliveries)
	}
}
