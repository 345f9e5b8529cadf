package txmqtest

import (
	"context"
	"fmt"
	"math"
	"slices"
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
	return OrderingLoadPickups(tb, be, ordered, keys, perKey).Took
}

// OrderingRun is what OrderingLoadPickups measured.
type OrderingRun struct {
	// Took is the time from the first publish to the last delivery.
	Took time.Duration
	// Pickups holds, per message, the time from its Publish call to its first delivery, in
	// no particular order.
	Pickups []time.Duration
}

// P returns the q-th quantile (0 < q <= 1) of r.Pickups, nearest rank; 0 when empty.
func (r OrderingRun) P(q float64) time.Duration {
	if len(r.Pickups) == 0 {
		return 0
	}
	s := slices.Clone(r.Pickups)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// OrderingLoadPickups is OrderingLoad that also records each message's pickup time (publish
// call to first delivery), for the per-key pickup percentiles of the ordering benchmarks.
func OrderingLoadPickups(tb testing.TB, be core.Backend, ordered bool, keys, perKey int) OrderingRun {
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
	total := keys * perKey
	var got atomic.Int64
	done := make(chan struct{})
	published := make([]int64, total)        // UnixNano of each message's Publish call
	delivered := make([]atomic.Int64, total) // UnixNano of each message's first delivery
	if err := q.Listen(n, func(_ context.Context, msgs []int) error {
		now := time.Now().UnixNano()
		for _, m := range msgs {
			if m >= 0 && m < total {
				delivered[m].CompareAndSwap(0, now)
			}
		}
		if got.Add(int64(len(msgs))) == int64(total) {
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
			m := k*perKey + i
			published[m] = time.Now().UnixNano()
			if err := q.Publish(ctx, n, m, opts...); err != nil {
				tb.Fatal(err)
			}
		}
	}
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		tb.Fatalf("txmqtest: OrderingLoad: %d of %d messages delivered in 10 minutes", got.Load(), total)
	}
	run := OrderingRun{Took: time.Since(start), Pickups: make([]time.Duration, 0, total)}
	for m := range total {
		if at := delivered[m].Load(); at != 0 {
			run.Pickups = append(run.Pickups, time.Duration(at-published[m]))
		}
	}
	return run
}

// BenchOrdering runs OrderingLoadPickups with 1,000 keys x 100 messages on an unordered and
// then an Ordered queue, each on a backend from open (one per run), as sub-benchmarks
// "unordered" and "ordered" of b. Each reports msgs/s and p99_pickup_ms (the 99th percentile
// of the messages' pickup times, publish call to first delivery); "ordered" also reports
// x_unordered, its throughput relative to the unordered run just before it, and
// p99_x_unordered, its p99 pickup relative to that run's. Run it with -benchtime 1x.
func BenchOrdering(b *testing.B, open func(b *testing.B) core.Backend) {
	const keys, perKey = 1000, 100
	var unordered, unorderedP99 time.Duration
	for _, ordered := range []bool{false, true} {
		name := "unordered"
		if ordered {
			name = "ordered"
		}
		b.Run(name, func(b *testing.B) {
			var took, p99 time.Duration
			for range b.N {
				r := OrderingLoadPickups(b, open(b), ordered, keys, perKey)
				took += r.Took
				p99 += r.P(0.99)
			}
			per, p99 := took/time.Duration(b.N), p99/time.Duration(b.N)
			b.ReportMetric(float64(keys*perKey)/per.Seconds(), "msgs/s")
			b.ReportMetric(float64(p99)/float64(time.Millisecond), "p99_pickup_ms")
			if !ordered {
				unordered, unorderedP99 = per, p99
				return
			}
			if unordered > 0 {
				b.ReportMetric(unordered.Seconds()/per.Seconds(), "x_unordered")
			}
			if unorderedP99 > 0 {
				b.ReportMetric(float64(p99)/float64(unorderedP99), "p99_x_unordered")
			}
		})
	}
}
