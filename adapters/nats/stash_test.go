package nats

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
)

// stashOne leaves one delivered but unhanded message of queue in be's stash: a Fetch is
// cancelled while its pull is outstanding, then a batch is published into that pull. The
// pull lives a quarter of the lease; on a loaded machine the publish can miss it, and the
// batch then waits in the stream: it is taken and acked, and the setup tries again.
func stashOne(t *testing.T, be *Backend, queue string, lease time.Duration) {
	t.Helper()
	pub := sibling(t, be)
	fetchWait(t, be, 0, lease, all(queue)) // create the consumer
	for attempt := range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		if cs, err := be.Fetch(ctx, core.FetchRequest{Node: "n", Lease: lease, Wait: lease, Queues: []core.QueueSlots{one(queue)}}); err != nil || len(cs) != 0 {
			t.Fatalf("cancelled fetch: %d claims, %v", len(cs), err)
		}
		publish(t, pub, queue, fmt.Sprintf("s%d", attempt), time.Time{})
		deadline := time.Now().Add(2 * lease)
		for time.Now().Before(deadline) {
			be.mu.Lock()
			n, polling := len(be.queues[queue].stash), be.queues[queue].polling
			be.mu.Unlock()
			if n == 1 {
				return
			}
			if !polling {
				break // the pull expired before the batch arrived
			}
			time.Sleep(5 * time.Millisecond)
		}
		for _, c := range fetchN(t, pub, 1, lease, one(queue)) {
			if err := pub.Ack(context.Background(), c); err != nil {
				t.Fatalf("ack a batch that missed the pull: %v", err)
			}
		}
	}
	t.Fatalf("no batch reached the stash in 5 attempts")
}

// A stashed message whose lease ran out has been redelivered to another node: giving it back
// (Nak) from the stale delivery would make the server hand the batch out a third time while
// the second holder still runs it (JetStream accepts a Nak from a previous holder).
func TestStaleStashNotGivenBack(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"fetch", "close"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			lease := 800 * time.Millisecond
			a := openBackend(t, natstest.NATSURL(t), nil)
			a.noStashSweep = true // the stash is left until its lease runs out (a sweep that could not run)
			b, c := sibling(t, a), sibling(t, a)
			stashOne(t, a, "q", lease)
			time.Sleep(lease + 200*time.Millisecond)
			held := fetchN(t, b, 1, lease, one("q"))[0]
			if held.Deliveries != 2 {
				t.Fatalf("redelivery to b: deliveries %d", held.Deliveries)
			}
			if how == "fetch" {
				if cs := fetchWait(t, a, 0, lease, one("q")); len(cs) != 0 {
					t.Fatalf("a handed out its stale stashed claim")
				}
			} else {
				a.Close()
			}
			if err := b.Extend(context.Background(), held, lease); err != nil {
				t.Fatalf("extend: %v", err)
			}
			if cs := fetchWait(t, c, lease/4, lease, one("q")); len(cs) != 0 {
				t.Fatalf("batch handed out again (deliveries %d) while b holds it", cs[0].Deliveries)
			}
			if err := b.Ack(context.Background(), held); err != nil {
				t.Fatalf("ack: %v", err)
			}
		})
	}
}
