package sqs

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestIdleReceivesOutliveThePollWait: a node polling idle queues with a short poll wait does
// not send a receive per queue per poll: an idle queue's receive long-polls Options.IdleWait
// across the node's Fetch calls, and still delivers a publish at once.
func TestIdleReceivesOutliveThePollWait(t *testing.T) {
	t.Parallel()
	s := newSpace(t)
	be := s.client(t, &Options{MaxNativeDelay: DefaultMaxNativeDelay})
	const queues, polls = 4, 12
	slots := make([]core.QueueSlots, queues)
	for i := range slots {
		slots[i] = core.QueueSlots{Queue: fmt.Sprintf("idle%d", i), Free: core.Unlimited}
	}
	req := core.FetchRequest{Node: "n", Queues: slots, Lease: 30 * time.Second, Wait: 250 * time.Millisecond}
	ctx := context.Background()
	for range 2 { // create the queues and see them empty once
		if cs, err := be.Fetch(ctx, req); err != nil || len(cs) != 0 {
			t.Fatalf("warm-up fetch: %d claims, %v", len(cs), err)
		}
	}
	time.Sleep(1200 * time.Millisecond) // the first receives (long polls of 1 s) end
	before := be.Requests()["ReceiveMessage"]
	for range polls {
		if cs, err := be.Fetch(ctx, req); err != nil || len(cs) != 0 {
			t.Fatalf("fetch: %d claims, %v", len(cs), err)
		}
	}
	receives := be.Requests()["ReceiveMessage"] - before
	t.Logf("%d idle polls of %d queues (%v) sent %d receives", polls, queues, polls*req.Wait, receives)
	if receives >= 2*queues {
		t.Fatalf("%d idle polls of %d queues sent %d receives, want fewer than two per queue", polls, queues, receives)
	}
	other := s.client(t, nil)
	cs := testenv.IdlePickup(t, be, req, "idle2", 2*time.Second, func() {
		if err := other.Publish(ctx, core.OutgoingBatch{ID: "b1", Queue: "idle2", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	})
	for _, c := range cs {
		if err := be.Ack(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}
