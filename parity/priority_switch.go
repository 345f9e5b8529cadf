package parity

import (
	"strconv"
	"time"

	"github.com/txmq/txmq/core"
)

// priorityQueueSwitch: batches stored while a queue had one Prioritized setting are all
// claimed after it changed. Batches of priorities 0 and 7, stored while the queue was
// prioritized, are claimed by fetches that no longer mark it Prioritized, both alone and
// beside a prioritized queue in the same request (the request an adapter may serve with its
// prioritized claim); a batch stored while a queue was plain is claimed by a fetch that marks
// it Prioritized.
func priorityQueueSwitch(x *X) {
	x.needPriority()
	ctx := x.ctx()
	b := x.rawClient()
	was, wasAlone, prio, became := x.queueName(), x.queueName(), x.queueName(), x.queueName()
	publish := func(queue string, p int, k string) {
		ob := rawBatch(queue, false, k)
		ob.Priority, ob.Lead = p, time.Duration(p)*time.Minute
		if err := b.Publish(ctx, ob); err != nil {
			x.T.Fatalf("Publish to %s at priority %d: %v", queue, p, err)
		}
	}
	for i, p := range []int{0, 7, 7, 0} {
		publish(was, p, "was"+strconv.Itoa(i))
	}
	publish(wasAlone, 7, "alone0")
	publish(wasAlone, 0, "alone1")
	publish(became, 0, "plain")
	// fetch claims until want claims of queue came back (acking each), within Caps.Timeout.
	fetch := func(queue string, want int, slots []core.QueueSlots) {
		x.T.Helper()
		got := 0
		deadline := time.Now().Add(x.Caps.Timeout)
		for got < want && time.Now().Before(deadline) {
			cs, err := b.Fetch(ctx, core.FetchRequest{Node: "parity-" + core.NewID(), Lease: x.Caps.Timeout, Wait: x.Caps.PollWait, Max: want - got, Queues: slots})
			if err != nil {
				x.T.Fatalf("Fetch: %v", err)
			}
			for _, c := range cs {
				if c.Queue != queue {
					x.T.Fatalf("Fetch returned a claim of %s; only %s has batches", c.Queue, queue)
				}
				if err := b.Ack(ctx, c); err != nil {
					x.T.Fatalf("Ack: %v", err)
				}
				got++
			}
		}
		if got < want {
			x.T.Fatalf("%d of the %d batches of %s claimed within %v after its Prioritized setting changed", got, want, queue, x.Caps.Timeout)
		}
	}
	fetch(was, 4, []core.QueueSlots{{Queue: was, Free: 4}, {Queue: prio, Free: 1, Prioritized: true}})
	fetch(wasAlone, 2, []core.QueueSlots{{Queue: wasAlone, Free: 2}})
	fetch(became, 1, []core.QueueSlots{{Queue: became, Free: 1, Prioritized: true}})
}
