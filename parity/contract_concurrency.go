package parity

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core"
)

func init() {
	register("contract",
		property{name: "concurrent_calls_one_client", run: concurrentCalls},
	)
}

// concurrentCalls: one client is used from many goroutines at once, as a node uses it:
// publishers, fetchers, and a goroutine per claim that extends it, retries it once and acks
// it, while others read the depths. Every published batch is handed out and acked exactly
// once (a retried one once more before its ack), with its body intact, every call succeeds,
// and the queues end empty. Run under -race, this is the data-race check of the adapter.
func concurrentCalls(x *X) {
	const workers, perWorker = 6, 8
	const total = workers * perWorker
	b := x.rawClient()
	qs := []string{x.queueName(), x.queueName()}
	lease := 5 * x.Caps.Lease // claims are settled long before it runs out
	ctx, cancel := context.WithTimeout(context.Background(), 3*x.Caps.Timeout)
	defer cancel()

	var (
		mu       sync.Mutex
		bodies   = map[string][]byte{} // id -> published body
		retried  = map[string]bool{}
		acked    = map[string]int{}
		handouts = map[string]int{}
		done     atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		x.T.Errorf(format, args...)
		cancel()
	}
	for w := range workers {
		wg.Go(func() { // publisher
			for i := range perWorker {
				batch := rawBatch(qs[i%2], false, fmt.Sprintf("c%d-%d", w, i))
				mu.Lock()
				bodies[batch.ID] = bytes.Clone(batch.Body)
				mu.Unlock()
				if err := b.Publish(ctx, batch); err != nil {
					fail("Publish: %v", err)
					return
				}
			}
		})
	}
	settle := func(c *core.Claim) {
		mu.Lock()
		handouts[c.ID]++
		want, ok := bodies[c.ID]
		again := retried[c.ID]
		retried[c.ID] = true
		mu.Unlock()
		if !ok || !bytes.Equal(c.Body, want) {
			fail("claim %s of %s: body differs from the published one (known id: %v)", c.ID, c.Queue, ok)
			return
		}
		if err := b.Extend(ctx, c, lease); err != nil {
			fail("Extend of claim %s: %v", c.ID, err)
			return
		}
		if !again {
			if err := b.Retry(ctx, c, bytes.Clone(c.Body), 0); err != nil {
				fail("Retry of claim %s: %v", c.ID, err)
			}
			return
		}
		if err := b.Ack(ctx, c); err != nil {
			fail("Ack of claim %s: %v", c.ID, err)
			return
		}
		mu.Lock()
		acked[c.ID]++
		mu.Unlock()
		done.Add(1)
	}
	var settles sync.WaitGroup
	for w := range workers {
		wg.Go(func() { // fetcher
			for done.Load() < total && ctx.Err() == nil {
				cs, err := b.Fetch(ctx, core.FetchRequest{Node: fmt.Sprintf("parity-f%d", w), Lease: lease, Wait: x.Caps.PollWait, Max: 4,
					Queues: []core.QueueSlots{{Queue: qs[0], Free: 2}, {Queue: qs[1], Free: core.Unlimited}}})
				if err != nil {
					if ctx.Err() == nil {
						fail("Fetch: %v", err)
					}
					return
				}
				for _, c := range cs {
					settles.Go(func() { settle(c) })
				}
			}
		})
	}
	wg.Go(func() { // depths reader
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := b.Depths(ctx, qs); err != nil && ctx.Err() == nil {
				fail("Depths: %v", err)
				return
			}
		}
	})
	for done.Load() < total && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	settles.Wait()
	if x.T.Failed() {
		return
	}
	if ctx.Err() != nil {
		x.T.Fatalf("%d of %d batches acked within %v", done.Load(), total, 3*x.Caps.Timeout)
	}
	mu.Lock()
	for id := range bodies {
		if acked[id] != 1 || handouts[id] != 2 {
			x.T.Errorf("batch %s: handed out %d times and acked %d times; want 2 (retried once) and 1", id, handouts[id], acked[id])
		}
	}
	mu.Unlock()
	for _, q := range qs {
		if seen := collect(x, b, q, lease, 0); len(seen) > 0 {
			x.T.Errorf("queue %s: %d acked batch(es) handed out again", q, len(seen))
		}
	}
}
