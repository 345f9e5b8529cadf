package txmq

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

type benchMsg struct {
	ID    int    `json:"id"`
	Email string `json:"email"`
}

// BenchmarkPublish measures one Publish call of one small message: encode, JSON round-trip
// check, id, buffer append. The flusher is kept out of the loop with a long window.
func BenchmarkPublish(b *testing.B) {
	n, err := NewNode(&fakeBackend{}, &NodeOptions{Registry: NewRegistry(), Logger: quietLogger(), FlushWindow: time.Hour, FlushCap: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	q := MustDeclareIn(n.Registry(), "bench", QueueConfig[benchMsg]{Transactional: Try})
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
	n.buf.discard()
}

// BenchmarkEncodeBatch measures encoding one 100-message batch (per message).
func BenchmarkEncodeBatch(b *testing.B) {
	spec := &queueSpec{name: "bench", maxBatch: 100}
	msgs, err := encodeMessages(spec, make([]benchMsg, 100))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		appendBatches(nil, spec, msgs, time.Time{}, 0, batchTraces{}, "", now, 0)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/msg")
}

// BenchmarkDecodeBatch measures decoding one 100-message batch into typed values (per message).
func BenchmarkDecodeBatch(b *testing.B) {
	spec := &queueSpec{name: "bench", maxBatch: 100}
	src := make([]benchMsg, 100)
	for i := range src {
		src[i] = benchMsg{ID: i, Email: "someone@example.com"}
	}
	msgs, _ := encodeMessages(spec, src)
	body := appendBatches(nil, spec, msgs, time.Time{}, 0, batchTraces{}, "", time.Now(), 0)[0].Body
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.DecodeTyped[benchMsg](body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/msg")
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
			n, err := NewNode(nopPublishBackend{&fakeBackend{}}, &NodeOptions{Registry: NewRegistry(), Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			batch := core.OutgoingBatch{ID: "b", Queue: "bench", Body: []byte(`{}`), Messages: 1}
			ctx := context.Background()
			b.ReportAllocs()
			if !parallel {
				for b.Loop() {
					if n.store(ctx, batch, false) != storedBackend {
						b.Fatal("not stored")
					}
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if n.store(ctx, batch, false) != storedBackend {
						b.Fatal("not stored")
					}
				}
			})
		})
	}
}
