package memory

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// BenchmarkPublishFetchAck measures one batch through Publish, Fetch and Ack, with an empty
// backend and with backlogs that Fetch must not scan. A 4 KiB body stands for ~100 messages.
func BenchmarkPublishFetchAck(b *testing.B) {
	for _, backlog := range []int{0, 10_000, 100_000} {
		b.Run("backlog="+strconv.Itoa(backlog), func(b *testing.B) {
			ctx := context.Background()
			be := New(nil)
			defer be.Close()
			body := make([]byte, 4096)
			for i := range backlog {
				batch := core.OutgoingBatch{ID: "old" + strconv.Itoa(i), Queue: "q", Body: body}
				if i%2 == 1 {
					batch.NotBefore = time.Now().Add(time.Hour) // half the backlog is delayed
				}
				if err := be.Publish(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			req := core.FetchRequest{Node: "n", Queues: []core.QueueSlots{{Queue: "q", Free: 1}}, Lease: time.Minute}
			batch := core.OutgoingBatch{ID: "b", Queue: "q", Body: body}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := be.Publish(ctx, batch); err != nil {
					b.Fatal(err)
				}
				cs, err := be.Fetch(ctx, req)
				if err != nil || len(cs) != 1 {
					b.Fatalf("fetch: %d claims, %v", len(cs), err)
				}
				if err := be.Ack(ctx, cs[0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
		})
	}
}
