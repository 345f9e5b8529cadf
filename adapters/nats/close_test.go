package nats

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/testenv/natsenv"
)

// pollGoroutines counts the goroutines running a pull of this package.
func pollGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "adapters/nats.(*Backend).poll(")
}

// Close stops the pulls still outstanding (a long poll that outlived its Fetch) at once,
// rather than leaving their goroutines running until the pull expires; with a connection
// the caller owns, too.
func TestCloseStopsOutstandingPulls(t *testing.T) {
	for _, own := range []bool{true, false} {
		t.Run(map[bool]string{true: "own", false: "with-conn"}[own], func(t *testing.T) {
			var be *Backend
			if own {
				be = openBackend(t, natsenv.NATSURL(t), nil)
			} else {
				nc, err := natsgo.Connect(natsenv.NATSURL(t))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(nc.Close)
				o := Options{Prefix: openBackend(t, natsenv.NATSURL(t), nil).opts.Prefix}
				if be, err = NewWithConn(nc, &o); err != nil {
					t.Fatal(err)
				}
			}
			lease := 40 * time.Second // pulls of up to 10s
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
			be.Close()
			deadline := time.Now().Add(time.Second)
			for pollGoroutines() > before {
				if time.Now().After(deadline) {
					t.Fatalf("%d pulls still running 1s after Close", pollGoroutines()-before)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
