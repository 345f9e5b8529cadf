package txmq

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// Batches run one after another reuse one parked goroutine.
func TestWorkerPoolReusesParkedWorker(t *testing.T) {
	t.Parallel()
	var p workerPool
	stop := make(chan struct{})
	defer close(stop)
	const runs = 50
	for range runs {
		done := make(chan struct{})
		p.run(stop, func() { close(done) })
		<-done
		waitFor(t, "a worker to park", func() bool { return p.idle.Load() >= 1 })
	}
	// A worker counts itself idle just before it waits for the handoff, so a batch handed in
	// that instant starts a goroutine of its own (a loaded machine showed it): reuse means
	// a few goroutines for many batches, not exactly one.
	if got := p.started.Load(); got > 5 {
		t.Fatalf("%d goroutines started for %d batches run one after another; want at most 5 (the parked worker reused)", got, runs)
	}
}

// Concurrent batches get their own goroutines; at most maxIdleWorkers stay parked, and stop
// ends every parked one.
func TestWorkerPoolBoundsIdleAndStops(t *testing.T) {
	t.Parallel()
	var p workerPool
	stop := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	n := maxIdleWorkers + 20
	wg.Add(n)
	for range n {
		p.run(stop, func() { wg.Done(); <-release })
	}
	wg.Wait()
	if got := p.started.Load(); got != int64(n) {
		t.Fatalf("%d goroutines started for %d concurrent batches", got, n)
	}
	close(release)
	waitFor(t, "the workers to park", func() bool { return p.idle.Load() == maxIdleWorkers })
	time.Sleep(10 * time.Millisecond)
	if got := p.idle.Load(); got != maxIdleWorkers {
		t.Fatalf("%d workers parked, want %d", got, maxIdleWorkers)
	}
	close(stop)
	waitFor(t, "the parked workers to end", func() bool { return p.idle.Load() == 0 })
}

// A node runs its batches on pooled goroutines: a node that ran many batches one at a time
// started far fewer goroutines than batches.
func TestNodeReusesWorkerGoroutines(t *testing.T) {
	t.Parallel()
	const batches = 40
	var mu sync.Mutex
	handed := 0
	fb := &fakeBackend{}
	fb.fetchFn = func(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
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
	q := MustDeclareIn(n.Registry(), "q", QueueConfig[int]{Transactional: Try, MaxConcurrentBatches: Cap(1)})
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
	if got := n.pool.started.Load(); got < 1 || got > batches/2 {
		t.Fatalf("%d worker goroutines started for %d batches run one at a time, want 1 to %d", got, batches, batches/2)
	}
}
