package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// Burn-down shape: a stream pre-filled with b.N one-message batches (about 100-byte
// messages), drained by 100 concurrent workers. Only the drain is timed.
const (
	burnConcurrency = 100
	burnPrefill     = 16 // parallel publishers while filling
)

// burnMsg is the message of the burn-down (about 100 bytes encoded).
type burnMsg struct {
	I   int    `json:"i"`
	Pad string `json:"p"`
}

var burnPad = fmt.Sprintf("%080d", 0)

// BenchmarkBurnDown drains a pre-filled queue of one-message batches at concurrency 100 with
// the whole engine (a node on the adapter: fetch, decode, listener, ack) and with a raw
// nats.go JetStream loop (one fetcher pulling up to 100 messages, 100 workers, each message
// acknowledged with Ack, the usual raw consumer: it does not wait for the server's reply,
// and with DoubleAck, which does; raw_4x, the fast way to write it: four pullers on one
// durable consumer, each fetching up to 100 and decoding and acking them inline, with no
// hand-off to workers; and raw_4x_consume, the same with the streaming iterator nats.go
// recommends for continuous processing, Consumer.Messages, which keeps a pull in flight
// while the messages of the last one are processed), on the same server in one run, so their
// ratio is meaningful. b.N counts messages: run it as -benchtime 20000x. Each reports its
// drain's msgs/s and this process's CPU per message (the server runs in a process of its
// own); see drainMeter for a profile of the drain alone. Set TXMQ_NATS_URL to time against
// a server of its own process rather than the embedded one.
func BenchmarkBurnDown(b *testing.B) {
	url := natstest.NATSURL(b)
	b.Run("txmq", func(b *testing.B) { burnTxmq(b, url, nil) })
	b.Run("raw", func(b *testing.B) { burnRaw(b, url, false) })
	b.Run("raw_double_ack", func(b *testing.B) { burnRaw(b, url, true) })
	b.Run("raw_4x", func(b *testing.B) { burnRaw4(b, url) })
	b.Run("raw_4x_consume", func(b *testing.B) { burnRaw4Consume(b, url) })
}

// parallel runs fn(i) for i in [0, n) on burnPrefill goroutines.
func parallel(b *testing.B, n int, fn func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range burnPrefill {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := fn(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// burnTxmq is the engine's burn-down on a Backend of url with opts (nil: the defaults).
func burnTxmq(b *testing.B, url string, opts *Options) {
	be := openBackend(b, url, opts)
	ctx := context.Background()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "burn", txmq.QueueConfig[burnMsg]{Transactional: txmq.Never, MaxBatchMessages: 1,
		MaxConcurrentBatches: txmq.Cap(burnConcurrency)})
	parallel(b, b.N, func(i int) error {
		m, _ := json.Marshal(burnMsg{I: i, Pad: burnPad})
		return be.Publish(ctx, parity.EncodeBatch("burn", nil, m))
	})
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	var got atomic.Int64
	done := make(chan struct{})
	want := int64(b.N)
	if err := q.Listen(n, func(_ context.Context, msgs []burnMsg) error {
		if got.Add(int64(len(msgs))) == want {
			close(done)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	meter := startDrain(b)
	if err := n.Start(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("drained %d of %d", got.Load(), want)
	}
	b.StopTimer()
	meter.stop()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	_ = n.Close(ctx)
}

func burnRaw(b *testing.B, url string, double bool) {
	nc, err := natsgo.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	name := testenv.UniqueName("burn")
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), name) }()
	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: -1})
	if err != nil {
		b.Fatal(err)
	}
	parallel(b, b.N, func(i int) error {
		m, _ := json.Marshal(burnMsg{I: i, Pad: burnPad})
		_, err := js.Publish(ctx, name+".r", m)
		return err
	})
	var got atomic.Int64
	want := int64(b.N)
	work := make(chan jetstream.Msg)
	b.ResetTimer()
	meter := startDrain(b)
	var wg sync.WaitGroup
	for range burnConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range work {
				var msg burnMsg
				if err := json.Unmarshal(m.Data(), &msg); err != nil {
					b.Error(err)
				}
				if double {
					err = m.DoubleAck(ctx)
				} else {
					err = m.Ack()
				}
				if err != nil {
					b.Error(err)
				}
				got.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Minute)
	for got.Load() < want && time.Now().Before(deadline) {
		batch, err := cons.Fetch(burnConcurrency, jetstream.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		for m := range batch.Messages() {
			work <- m
		}
	}
	close(work)
	wg.Wait()
	b.StopTimer()
	meter.stop()
	if got.Load() < want {
		b.Fatalf("drained %d of %d", got.Load(), want)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// burnRaw4 is the raw loop written the fast way (the anchor of issue 30): four goroutines pull
// from one durable consumer, each Fetch asking for up to 100 messages, and decode and Ack each
// message where it arrives.
func burnRaw4(b *testing.B, url string) {
	nc, err := natsgo.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	name := testenv.UniqueName("burn4")
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), name) }()
	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: -1})
	if err != nil {
		b.Fatal(err)
	}
	parallel(b, b.N, func(i int) error {
		m, _ := json.Marshal(burnMsg{I: i, Pad: burnPad})
		_, err := js.Publish(ctx, name+".r", m)
		return err
	})
	var got atomic.Int64
	want := int64(b.N)
	deadline := time.Now().Add(5 * time.Minute)
	b.ResetTimer()
	meter := startDrain(b)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for got.Load() < want && time.Now().Before(deadline) {
				batch, err := cons.Fetch(100, jetstream.FetchMaxWait(100*time.Millisecond))
				if err != nil {
					b.Error(err)
					return
				}
				for m := range batch.Messages() {
					var msg burnMsg
					if err := json.Unmarshal(m.Data(), &msg); err != nil {
						b.Error(err)
					}
					if err := m.Ack(); err != nil {
						b.Error(err)
					}
					got.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	meter.stop()
	if got.Load() < want {
		b.Fatalf("drained %d of %d", got.Load(), want)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// burnRaw4Consume is burnRaw4 with four Consumer.Messages iterators (at most 100 messages
// per pull, the iterator's own prefetch) in place of the Fetch loops.
func burnRaw4Consume(b *testing.B, url string) {
	nc, err := natsgo.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	name := testenv.UniqueName("burn4c")
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), name) }()
	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: -1})
	if err != nil {
		b.Fatal(err)
	}
	parallel(b, b.N, func(i int) error {
		m, _ := json.Marshal(burnMsg{I: i, Pad: burnPad})
		_, err := js.Publish(ctx, name+".r", m)
		return err
	})
	var got atomic.Int64
	want := int64(b.N)
	done := make(chan struct{})
	b.ResetTimer()
	meter := startDrain(b)
	iters := make([]jetstream.MessagesContext, 4)
	for i := range iters {
		if iters[i], err = cons.Messages(jetstream.PullMaxMessages(100)); err != nil {
			b.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, it := range iters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := it.Next()
				if err != nil {
					return // stopped
				}
				var msg burnMsg
				if err := json.Unmarshal(m.Data(), &msg); err != nil {
					b.Error(err)
				}
				if err := m.Ack(); err != nil {
					b.Error(err)
				}
				if got.Add(1) == want {
					close(done)
				}
			}
		}()
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
	}
	b.StopTimer()
	meter.stop()
	for _, it := range iters {
		it.Stop()
	}
	wg.Wait()
	if got.Load() < want {
		b.Fatalf("drained %d of %d", got.Load(), want)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
