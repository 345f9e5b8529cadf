package core

import (
	"sync"
	"time"
)

// buffer is the per-queue coalescing publish buffer: a sliding window reset by each message, a
// cap measured from the first message, and an early flush once a queue holds MaxBatchMessages.
// It is pure bookkeeping over an injected time, so its timing is testable without sleeping; the
// node's flusher drives it.
type buffer struct {
	window, limit time.Duration

	mu     sync.Mutex
	queues map[*queueSpec]*queueBuffer
	count  int
}

// queueBuffer holds the pending publishes of one queue.
type queueBuffer struct {
	spec        *queueSpec
	pending     []*Pending
	messages    int
	first, last time.Time
}

func newBuffer(window, limit time.Duration) *buffer {
	return &buffer{window: window, limit: limit, queues: make(map[*queueSpec]*queueBuffer)}
}

// add appends p at time now.
func (b *buffer) add(p *Pending, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	qb := b.queues[p.spec]
	if qb == nil {
		qb = &queueBuffer{spec: p.spec, first: now}
		b.queues[p.spec] = qb
	}
	qb.pending = append(qb.pending, p)
	qb.messages += len(p.Messages)
	qb.last = now
	b.count += len(p.Messages)
}

// take removes and returns the queue buffers that are due at now: full (MaxBatchMessages
// reached), quiet for the window, or older than the cap. all takes every buffer. Their messages
// stay counted until stored is called.
func (b *buffer) take(now time.Time, all bool) []*queueBuffer {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*queueBuffer
	for spec, qb := range b.queues {
		if all || qb.messages >= spec.maxBatch || now.Sub(qb.last) >= b.window || now.Sub(qb.first) >= b.limit {
			out = append(out, qb)
			delete(b.queues, spec)
		}
	}
	return out
}

// stored lowers the count once taken messages are stored (or handed off, or dropped), so that
// messages on their way to the backend still count as buffered.
func (b *buffer) stored(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.count -= n
}

// size returns the number of buffered messages, including those taken for a flush that has
// not finished.
func (b *buffer) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.count
}

// discard forgets everything (a simulated crash).
func (b *buffer) discard() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queues = make(map[*queueSpec]*queueBuffer)
	b.count = 0
}
