package nats

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestIdlePullsOutliveThePollWait: a node polling idle queues every 200 ms does not send a
// pull request per queue per poll: an idle queue's pull waits on the server for
// Options.IdlePull (at most a quarter of the AckWait), across the node's Fetch calls, and
// still delivers a publish at once.
func TestIdlePullsOutliveThePollWait(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natstest.NATSURL(t), nil)
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
	testenv.IdlePickup(t, be, req, "idle07", time.Second, func() { publish(t, other, "idle07", "b1", time.Time{}) })
}

// BenchmarkIdle reports the pull requests one node (PollWait 1 s, the default 30 s lease)
// sends per idle queue per hour: go test -run '^$' -bench Idle -benchtime 1x ./adapters/nats.
func BenchmarkIdle(b *testing.B) {
	be := openBackend(b, natstest.NATSURL(b), nil)
	reg := txmq.NewRegistry()
	n := txmqtest.StartNode(b, be, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger(), PollWait: time.Second, Lease: 30 * time.Second})
	const queues = 5
	for i := range queues {
		q := txmq.MustDeclareIn(reg, fmt.Sprintf("idle%d", i), txmq.QueueConfig[int]{Transactional: txmq.Try})
		if err := q.Listen(n, func(context.Context, []int) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second) // consumers and first pulls
	start, before := time.Now(), be.nc.Stats().OutMsgs
	b.ResetTimer()
	for range b.N {
		time.Sleep(30 * time.Second)
	}
	b.StopTimer()
	pulls := be.nc.Stats().OutMsgs - before
	b.ReportMetric(float64(pulls)/queues/time.Since(start).Hours(), "pulls/queue/hour")
}
