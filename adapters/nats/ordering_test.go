package nats

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
)

// publishKeyed stores batch id with key on queue, delayed by delay.
func publishKeyed(t testing.TB, be *Backend, queue, id, key string, delay time.Duration) {
	t.Helper()
	err := be.Publish(context.Background(), core.OutgoingBatch{ID: id, Queue: queue, Body: []byte("body-" + id), Key: key, Delay: delay})
	if err != nil {
		t.Fatalf("publish %s: %v", id, err)
	}
}

// TestOrderedLanes: batches of one key come one at a time, in order, each only once the one
// before is acked; a retried batch comes back first; another key is not held up.
func TestOrderedLanes(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natstest.NATSURL(t), nil)
	const q = "ordlanes"
	for i := range 3 {
		publishKeyed(t, be, q, fmt.Sprintf("a%d", i), "a", 0)
	}
	publishKeyed(t, be, q, "b0", "b", 0)
	slots := core.QueueSlots{Queue: q, Free: 10, Ordered: true}
	got := map[string]*core.Claim{}
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		for _, c := range fetchWait(t, be, time.Second, 5*time.Second, slots) {
			if _, dup := got[c.ID]; dup {
				t.Fatalf("batch %s handed out twice", c.ID)
			}
			got[c.ID] = c
		}
	}
	if got["a0"] == nil || got["b0"] == nil || len(got) != 2 {
		t.Fatalf("first claims: %v; want a0 and b0", keysOf(got))
	}
	if err := be.Retry(context.Background(), got["a0"], nil, 200*time.Millisecond); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	next := fetchUntil(t, be, slots)
	if next.ID != "a0" || next.Deliveries != 2 {
		t.Fatalf("after a retry: %s (deliveries %d); want a0 again, delivery 2", next.ID, next.Deliveries)
	}
	if err := be.Ack(context.Background(), next); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if c := fetchUntil(t, be, slots); c.ID != "a1" || c.Deliveries != 1 {
		t.Fatalf("after a0's ack: %s (deliveries %d); want a1, delivery 1", c.ID, c.Deliveries)
	}
}

// TestOrderedDelayInPlace: a delayed keyed batch is not handed out before it is due, the key's
// later batch waits for it, and its early receive is not counted as a delivery.
func TestOrderedDelayInPlace(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natstest.NATSURL(t), nil)
	const q = "orddelay"
	start := time.Now()
	publishKeyed(t, be, q, "d0", "d", time.Second)
	publishKeyed(t, be, q, "d1", "d", 0)
	slots := core.QueueSlots{Queue: q, Free: 10, Ordered: true}
	c := fetchUntil(t, be, slots)
	if c.ID != "d0" || time.Since(start) < time.Second || c.Deliveries != 1 {
		t.Fatalf("first claim %s after %v (deliveries %d); want d0 after 1s, delivery 1", c.ID, time.Since(start), c.Deliveries)
	}
	if err := be.Ack(context.Background(), c); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if c := fetchUntil(t, be, slots); c.ID != "d1" {
		t.Fatalf("second claim %s; want d1", c.ID)
	}
}

func fetchUntil(t testing.TB, be *Backend, slots core.QueueSlots) *core.Claim {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cs := fetchWait(t, be, time.Second, 5*time.Second, slots); len(cs) > 0 {
			if len(cs) > 1 {
				t.Fatalf("fetched %d claims of one key at once", len(cs))
			}
			return cs[0]
		}
	}
	t.Fatalf("nothing fetched within 10s")
	return nil
}

func keysOf(m map[string]*core.Claim) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestOrderedServerRestart: the key partitions' consumers keep their state in server memory
// (see "Ordering" in the package doc); after a server restart they are gone, and the next
// Fetch makes them again: the key's batches come in order, none lost.
func TestOrderedServerRestart(t *testing.T) {
	t.Parallel()
	srv := natstest.StartNATS(t)
	be := openBackend(t, srv.URL(), nil)
	const q = "ordrestart"
	for i := range 3 {
		publishKeyed(t, be, q, fmt.Sprintf("r%d", i), "r", 0)
	}
	slots := core.QueueSlots{Queue: q, Free: 10, Ordered: true}
	if c := fetchUntil(t, be, slots); c.ID != "r0" {
		t.Fatalf("first claim %s; want r0", c.ID)
	}
	srv.Shutdown()
	srv.Restart()
	eventually(t, "reconnected", func() bool { return be.nc.IsConnected() })
	for i := range 3 {
		want := fmt.Sprintf("r%d", i)
		deadline := time.Now().Add(15 * time.Second)
		var c *core.Claim
		for c == nil && time.Now().Before(deadline) {
			cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n1", Queues: []core.QueueSlots{slots}, Lease: 5 * time.Second, Wait: time.Second})
			if err != nil {
				continue // the consumer is made again by a later Fetch
			}
			if len(cs) > 0 {
				c = cs[0]
			}
		}
		if c == nil || c.ID != want {
			t.Fatalf("after the restart: claim %v; want %s", c, want)
		}
		if err := be.Ack(context.Background(), c); err != nil {
			t.Fatalf("Ack %s: %v", c.ID, err)
		}
	}
}

// TestPartitionsFromStream: the stream records its key partitions when it is made; a client
// with another Options.Partitions uses the stream's, and a stream made without them (an older
// txmq) gets this client's recorded.
func TestPartitionsFromStream(t *testing.T) {
	t.Parallel()
	url := natstest.NATSURL(t)
	a := openBackend(t, url, &Options{Partitions: 3})
	o := a.opts
	o.Partitions = 5
	b := openBackend(t, url, &o)
	ctx := context.Background()
	publishKeyed(t, a, "parts", "p0", "k", 0)
	for _, be := range []*Backend{a, b} {
		q, err := be.queue(ctx, "test", "parts")
		if err != nil {
			t.Fatalf("queue: %v", err)
		}
		if q.partitions != 3 || len(q.parts) != 3 {
			t.Fatalf("partitions %d (%d lanes); want the stream's 3", q.partitions, len(q.parts))
		}
	}
	// A stream without the metadata, as an older txmq made it.
	cfg := b.streamConfig(&queueState{name: "old", streamName: b.opts.Prefix + "_old", prefix: b.opts.Prefix + ".old."})
	cfg.Metadata = nil
	if _, err := b.js.CreateStream(ctx, cfg); err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	q, err := b.queue(ctx, "test", "old")
	if err != nil {
		t.Fatalf("queue: %v", err)
	}
	if q.partitions != 5 || partitionsOf(q.stream.CachedInfo()) != 5 {
		t.Fatalf("an old stream got partitions %d (recorded %d); want this client's 5", q.partitions, partitionsOf(q.stream.CachedInfo()))
	}
}

func TestPartitionOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key  string
		n    int
		want int
	}{
		// Pinned: every client (and every txmq version) must map a key to the same
		// partition, or a key's batches would be split across two partitions.
		{"a", 8, 4},
		{"b", 8, 5},
		{"a", 16, 12},
		{"x", 1, 0},
		{"x", 0, 0}, // no partitions recorded: one
	} {
		if got := partitionOf(tc.key, tc.n); got != tc.want || got < 0 || got >= max(tc.n, 1) {
			t.Errorf("partitionOf(%q, %d) = %d; want %d", tc.key, tc.n, got, tc.want)
		}
	}
	seen := map[int]bool{}
	for i := range 200 {
		seen[partitionOf(fmt.Sprintf("key-%d", i), 8)] = true
	}
	if len(seen) != 8 {
		t.Errorf("200 keys spread over %d of 8 partitions; want all 8", len(seen))
	}
}
