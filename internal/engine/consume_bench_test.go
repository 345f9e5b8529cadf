package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// consumeBackend hands out a fixed backlog of one-message batches as fast as they are asked
// for and acks for free, so that BenchmarkConsume measures the engine's own cost per claim:
// dispatch, decode, listener, settle, slots and leases.
type consumeBackend struct {
	*fakeBackend
	mu     sync.Mutex
	bodies [][]byte
	acked  atomic.Int64
}

func (b *consumeBackend) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	b.mu.Lock()
	var out []*core.Claim
	for _, q := range req.Queues {
		for free := q.Free; free > 0 && len(b.bodies) > 0; free-- {
			body := b.bodies[len(b.bodies)-1]
			b.bodies = b.bodies[:len(b.bodies)-1]
			out = append(out, &core.Claim{Queue: q.Queue, ID: "b", Body: body, Deliveries: 1, LeaseUntil: time.Now().Add(req.Lease)})
		}
	}
	b.mu.Unlock()
	if len(out) == 0 {
		select {
		case <-ctx.Done():
		case <-time.After(time.Millisecond):
		}
	}
	return out, nil
}

func (b *consumeBackend) Ack(context.Context, *core.Claim) error {
	b.acked.Add(1)
	return nil
}

// BenchmarkConsume measures what the engine spends per claimed one-message batch at
// concurrency 100 on a backend that costs (almost) nothing: b.N batches are stored first,
// then one node drains them. ns/op and allocs/op are per message.
func BenchmarkConsume(b *testing.B) {
	spec := &engine.Spec{Name: "bench", MaxBatch: 1}
	msg, err := json.Marshal(benchMsg{ID: 1, Email: "someone@example.com"})
	if err != nil {
		b.Fatal(err)
	}
	p := engine.Pending(spec, &core.Pending{Queue: "bench", Messages: []core.Message{{ID: core.NewID(), Body: msg}}}, engine.PendingOpts{})
	bs, err := engine.Batches([]*core.Pending{p}, time.Now(), false)
	if err != nil {
		b.Fatal(err)
	}
	body := bs[0].Body
	be := &consumeBackend{fakeBackend: &fakeBackend{}}
	for range b.N {
		be.bodies = append(be.bodies, body)
	}
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "bench", txmq.QueueConfig[benchMsg]{Transactional: txmq.Try, MaxBatchMessages: 1, MaxConcurrentBatches: txmq.Cap(100)})
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	var got atomic.Int64
	done := make(chan struct{})
	want := int64(b.N)
	if err := q.Listen(n, func(_ context.Context, ms []benchMsg) error {
		if got.Add(int64(len(ms))) == want {
			close(done)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	if err := n.Start(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("delivered %d of %d", got.Load(), b.N)
	}
	b.StopTimer()
	_ = n.Close(ctx)
	if a := be.acked.Load(); a != want {
		b.Fatalf("acked %d of %d", a, want)
	}
}
