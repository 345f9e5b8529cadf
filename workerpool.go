package txmq

import (
	"sync"
	"sync/atomic"
)

// maxIdleWorkers bounds the goroutines a node keeps parked for its next batches. Past it, a
// worker that finishes a batch ends, as it would without the pool.
const maxIdleWorkers = 256

// workerPool reuses the goroutines that run batches. A new goroutine starts on a small stack,
// and decoding a batch (encoding/json's reflection) and the listener grow it: at one message
// per batch the stack copies were about 15% of a node's CPU. A parked worker keeps its grown
// stack for the next batch. The zero value is ready; idle workers end when stop is done.
type workerPool struct {
	once    sync.Once
	handoff chan func() // unbuffered: a send succeeds only when a worker waits for it
	idle    atomic.Int32
	started atomic.Int64 // goroutines started, for tests
}

// run runs f on a parked worker if one waits, else on a new goroutine that then parks for up
// to maxIdleWorkers-1 others until stop is done.
func (p *workerPool) run(stop <-chan struct{}, f func()) {
	p.once.Do(func() { p.handoff = make(chan func()) })
	select {
	case p.handoff <- f:
	default:
		p.started.Add(1)
		go p.work(stop, f)
	}
}

// work runs f, then waits for the next func while the pool is not full and stop is not done.
func (p *workerPool) work(stop <-chan struct{}, f func()) {
	for {
		f()
		if p.idle.Add(1) > maxIdleWorkers {
			p.idle.Add(-1)
			return
		}
		select {
		case f = <-p.handoff:
			p.idle.Add(-1)
		case <-stop:
			p.idle.Add(-1)
			return
		}
	}
}
