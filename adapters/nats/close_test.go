package nats

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

// outstandingPulls counts be's pull requests still outstanding, over every lane of every
// queue (a count of the process's goroutines would include other tests' backends).
func outstandingPulls(be *Backend) int {
	be.mu.Lock()
	defer be.mu.Unlock()
	n := 0
	for _, q := range be.queues {
		if q.lane != nil {
			n += q.pulls
		}
		for _, p := range q.parts {
			n += p.pulls
		}
	}
	return n
}

// Close leaves no pull running: it waits for a pull still outstanding (a long poll that
// outlived its Fetch) to end on its own, at most the pull's wait, rather than cutting it
// (which would drop what the server already sent it, each a delivery counted that never ran);
// with a connection the caller owns, too.
func TestCloseStopsOutstandingPulls(t *testing.T) {
	for _, own := range []bool{true, false} {
		t.Run(map[bool]string{true: "own", false: "with-conn"}[own], func(t *testing.T) {
			var be *Backend
			if own {
				be = openBackend(t, natstest.NATSURL(t), nil)
			} else {
				nc, err := natsgo.Connect(natstest.NATSURL(t))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(nc.Close)
				o := Options{Prefix: openBackend(t, natstest.NATSURL(t), nil).opts.Prefix}
				if be, err = NewWithConn(nc, &o); err != nil {
					t.Fatal(err)
				}
			}
			lease := 4 * time.Second // pulls of up to 1s
			fetchWait(t, be, 0, lease, all("q"))
			// The pull of that fetch may outlive it (the queue is idle): let it end, so that
			// the pull outstanding below is the cancelled Fetch's own, with its whole wait left.
			txmqtest.Eventually(t, 10*time.Second, func() bool { return outstandingPulls(be) == 0 },
				"the first fetch's pull ended")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				// Cancel the Fetch once its pull is outstanding, not after a guessed time.
				for outstandingPulls(be) == 0 && ctx.Err() == nil {
					time.Sleep(time.Millisecond)
				}
				cancel()
			}()
			if _, err := be.Fetch(ctx, core.FetchRequest{Node: "n", Lease: lease, Wait: lease, Queues: []core.QueueSlots{all("q")}}); err != nil {
				t.Fatal(err)
			}
			if outstandingPulls(be) == 0 {
				t.Fatalf("no pull outstanding after the cancelled Fetch")
			}
			start := time.Now()
			be.Close()
			if took := time.Since(start); took > lease/4+time.Second {
				t.Fatalf("Close took %v; a pull waits at most %v", took, lease/4)
			}
			if n := outstandingPulls(be); n > 0 {
				t.Fatalf("%d pulls still outstanding after Close", n)
			}
		})
	}
}
