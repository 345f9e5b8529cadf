package nats

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestClusterURL: a backend opened with the URL form users write for a cluster,
// nats://a,b,c?txmq_replicas=3, on a 3-node JetStream cluster stores each queue in a stream
// replicated on all three nodes and delivers what was published.
func TestClusterURL(t *testing.T) {
	t.Parallel()
	prefix := testenv.UniqueName("c")
	raw := natstest.ClusterURL(t) + "?txmq_replicas=3&txmq_timeout=5s&txmq_prefix=" + prefix
	b, err := core.OpenBackend(context.Background(), raw)
	if err != nil {
		t.Fatalf("OpenBackend(%s): %v", raw, err)
	}
	be := b.(*Backend)
	t.Cleanup(func() { be.Close(); deleteStreams(t, natstest.ClusterURL(t), prefix) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 5
	for i := range n {
		if err := be.Publish(ctx, core.OutgoingBatch{ID: fmt.Sprintf("b%d", i), Queue: "q", Body: []byte("x"), Messages: 1}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	info, err := be.js.Stream(ctx, prefix+"_q")
	if err != nil {
		t.Fatalf("stream of queue q: %v", err)
	}
	si := info.CachedInfo()
	if si.Config.Replicas != 3 || si.Cluster == nil || si.Cluster.Leader == "" || len(si.Cluster.Replicas) != 2 {
		t.Fatalf("stream %s: replicas %d, cluster %+v; want 3 (a leader and 2 replicas)", si.Config.Name, si.Config.Replicas, si.Cluster)
	}
	seen := map[string]bool{}
	for len(seen) < n && ctx.Err() == nil {
		cs, err := be.Fetch(ctx, core.FetchRequest{Node: "n1", Queues: []core.QueueSlots{{Queue: "q", Free: core.Unlimited}}, Lease: 10 * time.Second, Wait: time.Second})
		if err != nil {
			t.Logf("fetch (tried again): %v", err)
			continue
		}
		for _, c := range cs {
			seen[c.ID] = true
			if err := be.Ack(ctx, c); err != nil {
				t.Fatalf("ack %s: %v", c.ID, err)
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("fetched %d of %d batches", len(seen), n)
	}
}
