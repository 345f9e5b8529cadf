package txmqtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// OrderingLoad is the load of the ordering benchmarks (BenchmarkOrdering in the memory, redis
// and sqljobs adapters): on one started node over be, it publishes perKey messages for each of
// keys keys, one Publish call per message, key after key (round robin), on a fresh queue that
// is Ordered (with the message's key) or not, and waits until a no-op listener got all of them.
// It returns the time from the first publish to the last delivery. Run it for the ordered and
// the unordered queue on the same backend in one run, and compare the two.
func OrderingLoad(tb testing.TB, be core.Backend, ordered bool, keys, perKey int) time.Duration {
	tb.Helper()
	reg := txmq.NewRegistry()
	name := fmt.Sprintf("bench-%d-%t", time.Now().UnixNano()%1e9, ordered)
	q, err := txmq.DeclareIn(reg, name, txmq.QueueConfig[int]{Transactional: txmq.Try, Ordered: ordered})
	if err != nil {
		tb.Fatal(err)
	}
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: DiscardLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	defer func() { _ = n.Close(ctx) }()
	total := int64(keys * perKey)
	var got atomic.Int64
	done := make(chan struct{})
	if err := q.Listen(n, func(_ context.Context, msgs []int) error {
		if got.Add(int64(len(msgs))) == total {
			close(done)
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	names := make([]string, keys)
	for k := range names {
		names[k] = fmt.Sprintf("key-%d", k)
	}
	start := time.Now()
	for i := range perKey {
		for k := range keys {
			var opts []txmq.PublishOption
			if ordered {
				opts = []txmq.PublishOption{txmq.Key(names[k])}
			}
			if err := q.Publish(ctx, n, i, opts...); err != nil {
				tb.Fatal(err)
			}
		}
	}
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		tb.Fatalf("txmqtest: OrderingLoad: %d of %d messages delivered in 10 minutes", got.Load(), total)
	}
	return time.Since(start)
}

// BenchOrdering runs OrderingLoad with 1,000 keys x 100 messages on an unordered and then an
// Ordered queue, each on a backend from open (one per run), as sub-benchmarks "unordered" and
// "ordered" of b. Each reports msgs/s; "ordered" also reports x_unordered, its throughput
// relative to the unordered run just before it. Run it with -benchtime 1x.
func BenchOrdering(b *testing.B, open func(b *testing.B) core.Backend) {
	const keys, perKey = 1000, 100
	var unordered time.Duration
	for _, ordered := range []bool{false, true} {
		name := "unordered"
		if ordered {
			name = "ordered"
		}
		b.Run(name, func(b *testing.B) {
			var took time.Duration
			for range b.N {
				took += OrderingLoad(b, open(b), ordered, keys, perKey)
			}
			per := took / time.Duration(b.N)
			b.ReportMetric(float64(keys*perKey)/per.Seconds(), "msgs/s")
			if !ordered {
				unordered = per
			} else if unordered > 0 {
				b.ReportMetric(unordered.Seconds()/per.Seconds(), "x_unordered")
			}
		})
	}
}
