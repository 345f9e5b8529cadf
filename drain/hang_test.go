package drain_test

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/txmqtest"
)

// hung is an old backend whose host stopped answering (packets dropped): every call blocks
// until its context ends.
type hung struct{ core.Backend }

func (hung) Fetch(ctx context.Context, _ core.FetchRequest) ([]*core.Claim, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hung) Depths(ctx context.Context, _ []string) (map[string]core.Depth, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// An old backend that hangs must not starve the primary: with the node's fetch budget (Wait +
// ClaimTimeout), the primary's work is still returned, and later fetches do not wait on the
// hung backend every time.
func TestHungOldBackendDoesNotStarveThePrimary(t *testing.T) {
	t.Parallel()
	primary := newMemory(t)
	d := drain.New(primary, []core.Backend{hung{newMemory(t)}}, &drain.Options{Logger: txmqtest.DiscardLogger(), CheckInterval: time.Hour})
	for range 3 {
		publish(t, primary, rawBatch("q", false, "new"), rawBatch("solo", true, "x"))
	}
	var total time.Duration
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		cs, err := d.Fetch(ctx, core.FetchRequest{Node: "n", Lease: time.Minute, Queues: []core.QueueSlots{{Queue: "q", Free: 1}}})
		took := time.Since(start)
		cancel()
		total += took
		if err != nil || len(cs) != 1 {
			t.Fatalf("fetch %d with a hung old backend = %d claims, %v after %v; want the primary's batch", i+1, len(cs), err, took)
		}
	}
	if total > 3*time.Second {
		t.Errorf("3 fetches took %v: each one waits on the hung old backend", total)
	}
	// An exclusive queue stays gated: the hung old backend may still hold a batch of it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cs, err := d.Fetch(ctx, core.FetchRequest{Node: "n", Lease: time.Minute, Queues: []core.QueueSlots{{Queue: "solo", Free: 1, Exclusive: true}}})
	if err != nil || len(cs) != 0 {
		t.Fatalf("exclusive fetch with a hung old backend = %d claims, %v; want none (the old backend may hold one)", len(cs), err)
	}
}
