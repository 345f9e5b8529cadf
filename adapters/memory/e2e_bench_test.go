package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
)

type e2eMsg struct {
	ID    int    `json:"id"`
	Email string `json:"email"`
}

// BenchmarkEndToEnd publishes bursts of small messages on one node and waits until every one
// was delivered: publish, coalesce, encode, store, fetch, decode, run, ack. It reports
// messages/s for the whole path; b.N counts messages. The sub-benchmarks set the queue's
// MaxBatchMessages: batch-100 coalesces, batch-1 pays the whole path per message.
func BenchmarkEndToEnd(b *testing.B) {
	for _, size := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch-%d", size), func(b *testing.B) { benchEndToEnd(b, size) })
	}
}

func benchEndToEnd(b *testing.B, batch int) {
	be := memory.New(nil)
	defer be.Close()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "e2e", txmq.QueueConfig[e2eMsg]{Transactional: txmq.Try, MaxBatchMessages: batch})
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), FlushTick: time.Millisecond, FlushWindow: 5 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	var got atomic.Int64
	done := make(chan struct{}, 1)
	var want atomic.Int64
	if err := q.Listen(n, func(_ context.Context, msgs []e2eMsg) error {
		if got.Add(int64(len(msgs))) == want.Load() {
			done <- struct{}{}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := n.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = n.Close(ctx) }()
	want.Store(int64(b.N))
	msg := e2eMsg{Email: "someone@example.com"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		msg.ID = i
		if err := q.Publish(ctx, n, msg); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatalf("delivered %d of %d", got.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkEndToEndOnePerBatch is the shape of `txmq bench --backend memory:// --batch 1
// --concurrency 100`: one message per batch, at most 100 batches running, the node's default
// flush settings, the publishing included; b.N counts messages. With -benchmem it gives the
// allocations per message of the whole path.
func BenchmarkEndToEndOnePerBatch(b *testing.B) {
	be := memory.New(nil)
	defer be.Close()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "e2e1", txmq.QueueConfig[e2eMsg]{Transactional: txmq.Never, MaxBatchMessages: 1, MaxConcurrentBatches: txmq.Cap(100)})
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	var got atomic.Int64
	done := make(chan struct{}, 1)
	want := int64(b.N)
	if err := q.Listen(n, func(_ context.Context, msgs []e2eMsg) error {
		if got.Add(int64(len(msgs))) == want {
			done <- struct{}{}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := n.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = n.Close(ctx) }()
	msg := e2eMsg{Email: "someone@example.com"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		msg.ID = i
		if err := q.Publish(ctx, n, msg); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("delivered %d of %d", got.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkBaselineChannelJSON is the floor any JSON queue pays, for comparison with
// BenchmarkEndToEnd in the same run: each message is marshalled, 100 at a time are joined into
// a JSON array and sent over a channel to a consumer goroutine that decodes them. No ids, no
// envelope, no leases, no policy.
func BenchmarkBaselineChannelJSON(b *testing.B) {
	ch := make(chan []byte, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for body := range ch {
			var msgs []e2eMsg
			if err := json.Unmarshal(body, &msgs); err != nil {
				panic(err)
			}
		}
	}()
	msg := e2eMsg{Email: "someone@example.com"}
	b.ReportAllocs()
	b.ResetTimer()
	buf := []byte{'['}
	for i := range b.N {
		msg.ID = i
		m, err := json.Marshal(msg)
		if err != nil {
			b.Fatal(err)
		}
		if len(buf) > 1 {
			buf = append(buf, ',')
		}
		buf = append(buf, m...)
		if (i+1)%100 == 0 || i == b.N-1 {
			ch <- append(buf, ']')
			buf = []byte{'['}
		}
	}
	close(ch)
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
