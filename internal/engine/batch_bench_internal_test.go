package engine

import (
	"testing"
	"time"

	"github.com/txmq/txmq/internal/envelope"
)

// BenchmarkEncodeBatch measures encoding one 100-message batch (per message).
func BenchmarkEncodeBatch(b *testing.B) {
	spec := &Spec{Name: "bench", MaxBatch: 100}
	msgs, err := encodeMessages(spec, make([]benchMsg, 100))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		appendBatches(nil, spec, msgs, time.Time{}, 0, batchTraces{}, "", 0, "", now, 0, 0, false)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/msg")
}

// BenchmarkDecodeBatch measures decoding one 100-message batch into typed values (per message).
func BenchmarkDecodeBatch(b *testing.B) {
	spec := &Spec{Name: "bench", MaxBatch: 100}
	src := make([]benchMsg, 100)
	for i := range src {
		src[i] = benchMsg{ID: i, Email: "someone@example.com"}
	}
	msgs, _ := encodeMessages(spec, src)
	body := appendBatches(nil, spec, msgs, time.Time{}, 0, batchTraces{}, "", 0, "", time.Now(), 0, 0, false)[0].Body
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.DecodeTyped[benchMsg](body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/msg")
}
