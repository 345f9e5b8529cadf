package nats

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/testenv/natsenv"
)

// TestIdlePullsOutliveThePollWait: a node polling idle queues every 200 ms does not send a
// pull request per queue per poll: an idle queue's pull waits on the server for
// Options.IdlePull (at most a quarter of the AckWait), across the node's Fetch calls, and
// still delivers a publish at once.
func TestIdlePullsOutliveThePollWait(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natsenv.NATSURL(t), nil)
	const queues, polls = 20, 10
	slots := make([]core.QueueSlots, queues)
	for i := range slots {
		slots[i] = all(fmt.Sprintf("idle%02d", i))
	}
	req := core.FetchRequest{Node: "n", Queues: slots, Lease: 30 * time.Second, Wait: 200 * time.Millisecond}
	ctx := context.Background()
	for range 2 { // create the consumers and see the queues empty once
		if cs, err := be.Fetch(ctx, req); err != nil || len(cs) != 0 {
			t.Fatalf("warm-up fetch: %d claims, %v", len(cs), err)
		}
	}
	before := be.nc.Stats().OutMsgs
	for range polls {
		if cs, err := be.Fetch(ctx, req); err != nil || len(cs) != 0 {
			t.Fatalf("fetch: %d claims, %v", len(cs), err)
		}
	}
	pulls := be.nc.Stats().OutMsgs - before
	t.Logf("%d idle polls of %d queues sent %d pull requests", polls, queues, pulls)
	if pulls >= 2*queues {
		t.Fatalf("%d idle polls of %d queues sent %d pull requests, want fewer than two per queue", polls, queues, pulls)
	}
	other := sibling(t, be)
	got := make(chan []*core.Claim, 1)
	go func() {
		r := req
		r.Wait = 5 * time.Second
		cs, err := be.Fetch(ctx, r)
		if err != nil {
			t.Error(err)
		}
		got <- cs
	}()
	time.Sleep(50 * time.Millisecond)
	sent := time.Now()
	publish(t, other, "idle07", "b1", time.Time{})
	cs := <-got
	if len(cs) != 1 || cs[0].Queue != "idle07" {
		t.Fatalf("after a publish to an idle queue: %d claims", len(cs))
	}
	if lat := time.Since(sent); lat > time.Second {
		t.Fatalf("an idle queue took %v to pick up a publish", lat)
	}
}
