package engine

import (
	"sync"
	"testing"
	"time"
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
