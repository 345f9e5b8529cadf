package nats

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
)

// pollGoroutines counts the goroutines running a pull of this package.
func pollGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "adapters/nats.(*Backend).poll(")
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
			before := pollGoroutines()
			ctx, cancel := context.WithCancel(context.Background())
			go func() { time.Sleep(50 * time.Millisecond); cancel() }()
			if _, err := be.Fetch(ctx, core.FetchRequest{Node: "n", Lease: lease, Wait: lease, Queues: []core.QueueSlots{all("q")}}); err != nil {
				t.Fatal(err)
			}
			if n := pollGoroutines(); n <= before {
				t.Fatalf("no pull outstanding after the cancelled Fetch")
			}
			start := time.Now()
			be.Close()
			if took := time.Since(start); took > lease/4+time.Second {
				t.Fatalf("Close took %v; a pull waits at most %v", took, lease/4)
			}
			if n := pollGoroutines(); n > before {
				t.Fatalf("%d pulls still running after Close", n-before)
			}
		})
	}
}
