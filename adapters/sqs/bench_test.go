package sqs

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/txmqtest"
)

type benchMsg struct {
	ID int       `json:"id"`
	At time.Time `json:"at"`
}

func totalRequests(bes ...*Backend) int64 {
	var n int64
	for _, be := range bes {
		for _, v := range be.Requests() {
			n += v
		}
	}
	return n
}

// BenchmarkEndToEnd publishes b.N small messages from one node and consumes them on two
// (separate clients), through the SQS emulator: publish, coalesce, store, fetch, run, ack.
// It reports messages/s, pickup latency (publish call to listener start, p50/p99) and SQS
// requests per 1,000 messages across all three clients. Run with -benchtime=5000x.
func BenchmarkEndToEnd(b *testing.B) {
	s := newSpace(b)
	pubBE := s.client(b, &Options{MaxNativeDelay: DefaultMaxNativeDelay})
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "e2e", txmq.QueueConfig[benchMsg]{Transactional: txmq.Try, MaxBatchMessages: 100})
	opts := func(be *Backend) *txmq.NodeOptions {
		return &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger(),
			FlushTick: time.Millisecond, FlushWindow: 5 * time.Millisecond, PollWait: 20 * time.Second, Lease: 30 * time.Second}
	}
	pub := txmqtest.StartNode(b, pubBE, opts(pubBE))
	var mu sync.Mutex
	var lat []time.Duration
	var got atomic.Int64
	done := make(chan struct{}, 1)
	want := int64(b.N)
	consumers := []*Backend{s.client(b, &Options{MaxNativeDelay: DefaultMaxNativeDelay}), s.client(b, &Options{MaxNativeDelay: DefaultMaxNativeDelay})}
	for _, be := range consumers {
		n := txmqtest.StartNode(b, be, opts(be))
		if err := q.Listen(n, func(_ context.Context, msgs []benchMsg) error {
			now := time.Now()
			mu.Lock()
			for _, m := range msgs {
				lat = append(lat, now.Sub(m.At))
			}
			mu.Unlock()
			if got.Add(int64(len(msgs))) >= want {
				select {
				case done <- struct{}{}:
				default:
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // let the consumers' first polls start
	before := totalRequests(append(consumers, pubBE)...)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if err := q.Publish(ctx, pub, benchMsg{ID: i, At: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatalf("delivered %d of %d", got.Load(), b.N)
	}
	b.StopTimer()
	reqs := totalRequests(append(consumers, pubBE)...) - before
	mu.Lock()
	slices.Sort(lat)
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Milliseconds()) }
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(p(0.50), "p50_ms")
	b.ReportMetric(p(0.99), "p99_ms")
	mu.Unlock()
	b.ReportMetric(float64(reqs)*1000/float64(b.N), "requests/1000msgs")
}

// BenchmarkIdle measures what idle queues cost: a node listens to 5 empty queues with the
// given PollWait for a few waits; it reports ReceiveMessage requests per queue per hour.
// PollWait=default leaves NodeOptions.PollWait zero, so the node uses PollWaitHint (20 s).
func BenchmarkIdle(b *testing.B) {
	for _, wait := range []time.Duration{time.Second, 5 * time.Second, 0} {
		name := fmt.Sprintf("PollWait=%v", wait)
		if wait == 0 {
			name = "PollWait=default"
		}
		b.Run(name, func(b *testing.B) {
			s := newSpace(b)
			be := s.client(b, &Options{MaxNativeDelay: DefaultMaxNativeDelay})
			reg := txmq.NewRegistry()
			var n *txmq.Node
			if wait > 0 {
				n = txmqtest.StartNode(b, be, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger(), PollWait: wait})
			} else {
				// Not txmqtest.StartNode, which sets a short test PollWait.
				var err error
				if n, err = txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger()}); err != nil {
					b.Fatal(err)
				}
				if err := n.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = n.Close(context.Background()) })
				wait = be.PollWaitHint()
			}
			const queues = 5
			for i := range queues {
				q := txmq.MustDeclareIn(reg, fmt.Sprintf("idle%d", i), txmq.QueueConfig[benchMsg]{Transactional: txmq.Try})
				if err := q.Listen(n, func(context.Context, []benchMsg) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			time.Sleep(wait + time.Second) // queue creation and first polls
			start, before := time.Now(), be.Requests()["ReceiveMessage"]
			b.ResetTimer()
			for range b.N {
				time.Sleep(3 * max(wait, be.opts.IdleWait)) // an idle receive outlives a shorter wait
			}
			b.StopTimer()
			polls := be.Requests()["ReceiveMessage"] - before
			b.ReportMetric(float64(polls)/queues/time.Since(start).Hours(), "receives/queue/hour")
		})
	}
}
