package nats

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// Benchmark shape shared by the adapter and the raw loop: producers publish b.N batches of
// benchMsgs messages each (a ~5 KiB body stamped with its publish time), workers fetch up to
// benchFetch at a time with a 100 ms wait and acknowledge each batch synchronously (a double
// ack, as the adapter does). Reported: messages/s end to end and the p50/p99 pickup latency
// (publish start to handout by a fetch).
const (
	benchMsgs      = 100
	benchBody      = 5 << 10
	benchFetch     = 32
	benchProducers = 4
	benchWorkers   = 4
)

// BenchmarkEndToEnd runs the adapter and a raw nats.go JetStream loop side by side on the same
// server, in one run, so their ratio is meaningful.
func BenchmarkEndToEnd(b *testing.B) {
	url := natstest.NATSURL(b)
	b.Run("adapter", func(b *testing.B) { benchAdapter(b, url) })
	b.Run("raw", func(b *testing.B) { benchRaw(b, url) })
}

type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(body []byte) {
	sent := time.Unix(0, int64(binary.BigEndian.Uint64(body)))
	d := time.Since(sent)
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	slices.Sort(l.d)
	if len(l.d) == 0 {
		return
	}
	b.ReportMetric(float64(b.N*benchMsgs)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(l.d[len(l.d)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(l.d[len(l.d)*99/100].Microseconds())/1000, "p99_ms")
}

func stamped() []byte {
	body := make([]byte, benchBody)
	binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
	return body
}

// produce runs benchProducers goroutines publishing n batches in total.
func produce(b *testing.B, n int, pub func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range benchProducers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := pub(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func benchAdapter(b *testing.B, url string) {
	be := openBackend(b, url, nil)
	ctx := context.Background()
	lease := 30 * time.Second
	if _, err := be.Fetch(ctx, core.FetchRequest{Node: "w", Lease: lease, Queues: []core.QueueSlots{{Queue: "bench", Free: core.Unlimited}}}); err != nil {
		b.Fatal(err)
	}
	var lat latencies
	var done atomic.Int64
	n := int64(b.N)
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range benchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < n {
				cs, err := be.Fetch(ctx, core.FetchRequest{Node: fmt.Sprint("w", w), Lease: lease, Wait: 100 * time.Millisecond, Max: benchFetch,
					Queues: []core.QueueSlots{{Queue: "bench", Free: core.Unlimited}}})
				if err != nil {
					b.Error(err)
					return
				}
				for _, c := range cs {
					lat.add(c.Body)
					if err := be.Ack(ctx, c); err != nil {
						b.Error(err)
						return
					}
					done.Add(1)
				}
			}
		}()
	}
	produce(b, b.N, func(i int) error {
		return be.Publish(ctx, core.OutgoingBatch{ID: fmt.Sprint(i), Queue: "bench", Body: stamped(), Messages: benchMsgs})
	})
	wg.Wait()
	b.StopTimer()
	lat.report(b)
}

func benchRaw(b *testing.B, url string) {
	nc, err := natsgo.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	name := testenv.UniqueName("raw")
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		b.Fatal(err)
	}
	defer js.DeleteStream(context.Background(), name)
	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: -1})
	if err != nil {
		b.Fatal(err)
	}
	var lat latencies
	var done atomic.Int64
	n := int64(b.N)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range benchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < n {
				batch, err := cons.Fetch(benchFetch, jetstream.FetchMaxWait(100*time.Millisecond))
				if err != nil {
					b.Error(err)
					return
				}
				for m := range batch.Messages() {
					lat.add(m.Data())
					if err := m.DoubleAck(ctx); err != nil {
						b.Error(err)
						return
					}
					done.Add(1)
				}
			}
		}()
	}
	produce(b, b.N, func(i int) error {
		_, err := js.Publish(ctx, name+".r", stamped())
		return err
	})
	wg.Wait()
	b.StopTimer()
	lat.report(b)
}
