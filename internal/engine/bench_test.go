package engine_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/txmq/txmq/internal/engine"

	"github.com/txmq/txmq"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
)

type benchMsg struct {
	ID    int    `json:"id"`
	Email string `json:"email"`
}

// BenchmarkPublish measures one Publish call of one small message: encode, JSON round-trip
// check, id, buffer append. The flusher is kept out of the loop with a long window.
func BenchmarkPublish(b *testing.B) {
	n, err := txmq.NewNode(&fakeBackend{}, &txmq.NodeOptions{Registry: txmq.NewRegistry(), Logger: quietLogger(), FlushWindow: time.Hour, FlushCap: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	q := txmq.MustDeclareIn(n.Registry(), "bench", txmq.QueueConfig[benchMsg]{Transactional: txmq.Try})
	ctx := context.Background()
	msg := benchMsg{ID: 1, Email: "someone@example.com"}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := q.Publish(ctx, n, msg); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	engine.Of(n).Discard()
}

// nopPublishBackend is a fakeBackend whose Publish keeps nothing, so a benchmark of the write
// path measures the node's own cost per write.
type nopPublishBackend struct{ *fakeBackend }

func (nopPublishBackend) Publish(context.Context, core.OutgoingBatch) error { return nil }

// BenchmarkStore measures the node's own cost of writing one one-message batch (Node.store:
// call context, in-flight registration for Close, ledger time, stats) on a backend that keeps
// nothing; parallel runs the writes from GOMAXPROCS goroutines, as a flush's writers do.
func BenchmarkStore(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run(map[bool]string{false: "serial", true: "parallel"}[parallel], func(b *testing.B) {
			n, err := txmq.NewNode(nopPublishBackend{&fakeBackend{}}, &txmq.NodeOptions{Registry: txmq.NewRegistry(), Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			batch := core.OutgoingBatch{ID: "b", Queue: "bench", Body: []byte(`{}`), Messages: 1}
			ctx := context.Background()
			b.ReportAllocs()
			if !parallel {
				for b.Loop() {
					if !engine.Of(n).Store(ctx, batch) {
						b.Fatal("not stored")
					}
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !engine.Of(n).Store(ctx, batch) {
						b.Fatal("not stored")
					}
				}
			})
		})
	}
}

// BenchmarkPublishIDs measures Publish plus its share of a synchronous flush into the memory
// backend (one flush per 100 publishes), per message: a queue without IDDedupWindow (the
// baseline), the same with a window and generated ids (must cost the same: generated ids
// never pay for dedup), and with a window and a caller id per message.
func BenchmarkPublishIDs(b *testing.B) {
	for _, bc := range []struct {
		name   string
		window time.Duration
		ids    bool
	}{
		{"plain", 0, false},
		{"window_generated_ids", time.Minute, false},
		{"window_caller_ids", time.Minute, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			be := memory.New(nil)
			defer be.Close()
			n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: txmq.NewRegistry(), Logger: quietLogger(), FlushWindow: time.Hour, FlushCap: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			q := txmq.MustDeclareIn(n.Registry(), "bench", txmq.QueueConfig[benchMsg]{Transactional: txmq.Try, IDDedupWindow: bc.window})
			ctx := context.Background()
			msg := benchMsg{ID: 1, Email: "someone@example.com"}
			var opts []txmq.PublishOption
			i := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if bc.ids {
					opts = []txmq.PublishOption{txmq.ID("order-" + strconv.Itoa(i))}
				}
				if err := q.Publish(ctx, n, msg, opts...); err != nil {
					b.Fatal(err)
				}
				if i++; i%100 == 0 {
					engine.Of(n).FlushAll(ctx)
				}
			}
			engine.Of(n).FlushAll(ctx)
			b.StopTimer()
			if got := n.Stats().PublishedMessages; got != int64(i) {
				b.Fatalf("stored %d of %d messages", got, i)
			}
		})
	}
}
