package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// A node runs its batches on pooled goroutines: a node that ran many batches one at a time
// started far fewer goroutines than batches.
func TestNodeReusesWorkerGoroutines(t *testing.T) {
	t.Parallel()
	const batches = 40
	var mu sync.Mutex
	handed := 0
	fb := &fakeBackend{}
	fb.FetchFn = func(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
		mu.Lock()
		more := handed < batches && len(req.Queues) == 1 && req.Queues[0].Free > 0
		if more {
			handed++
		}
		mu.Unlock()
		if !more {
			select {
			case <-ctx.Done():
			case <-time.After(req.Wait):
			}
			return nil, nil
		}
		b := batchBody(t, 0, "1")
		e, _ := envelope.Decode(b)
		return []*core.Claim{{Queue: "q", ID: e.ID, Body: b, Deliveries: 1, LeaseUntil: time.Now().Add(time.Minute)}}, nil
	}
	n := newTestNodeOn(t, fb, nil)
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxConcurrentBatches: txmq.Cap(1)})
	ran := make(chan struct{}, batches)
	if err := q.Listen(n, func(context.Context, []int) error { ran <- struct{}{}; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range batches {
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("batches stopped running")
		}
	}
	if got := engine.Of(n).PoolStarted(); got < 1 || got > batches/2 {
		t.Fatalf("%d worker goroutines started for %d batches run one at a time, want 1 to %d", got, batches, batches/2)
	}
}
