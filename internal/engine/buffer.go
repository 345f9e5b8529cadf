package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core"
)

// buffer is the per-queue coalescing publish buffer: a sliding window reset by each message, a
// cap measured from the first message, and an early flush once a queue holds MaxBatchMessages.
// It is pure bookkeeping over an injected time, so its timing is testable without sleeping; the
// node's flusher drives it.
//
// The buffer is unbounded: a publisher never blocks on the backend, so a burst much faster than
// the backend accepts grows it (watch Stats.Buffered). Once sealed (the node closed) it takes
// nothing more, so nothing can be left in it after the node's last drain.
type buffer struct {
	window, limit time.Duration
	// start runs once, under mu, at the first add: it starts the node's flusher. Running it
	// under mu orders it before seal, so Close always waits for a flusher that was started.
	start func()

	sealed  atomic.Bool // written under mu; read without it on the publish fast path
	mu      sync.Mutex
	queues  map[*Spec]*queueBuffer
	count   int
	started bool
	// flights orders the flushes of each ordered key (see flights.go); guarded by mu.
	flights flights
}

// queueBuffer holds the pending publishes of one queue.
type queueBuffer struct {
	spec        *Spec
	pending     []*core.Pending
	messages    int
	first, last time.Time
	// perKey counts an ordered queue's messages by key, and fullest is the largest count: a
	// batch holds one key, so the queue is full when one key fills a batch.
	perKey  map[string]int
	fullest int
	// flights are the flights of its ordered keys once taken for a flush (flights.take).
	flights map[string]*flight
}

// full reports whether the queue buffer holds a full batch: MaxBatchMessages messages, or on
// an ordered queue MaxBatchMessages messages of one key.
func (qb *queueBuffer) full() bool {
	if qb.perKey != nil {
		return qb.fullest >= qb.spec.MaxBatch
	}
	return qb.messages >= qb.spec.MaxBatch
}

func newBuffer(window, limit time.Duration, start func()) *buffer {
	return &buffer{window: window, limit: limit, start: start, queues: make(map[*Spec]*queueBuffer)}
}

// add appends p at time now. It returns false, taking nothing, once the buffer is sealed.
func (b *buffer) add(p *core.Pending, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sealed.Load() {
		return false
	}
	if !b.started && b.start != nil {
		b.started = true
		b.start()
	}
	spec := meta(p).spec
	qb := b.queues[spec]
	if qb == nil {
		qb = &queueBuffer{spec: spec, first: now}
		b.queues[spec] = qb
	}
	qb.pending = append(qb.pending, p)
	qb.messages += len(p.Messages)
	if spec.Ordered {
		if qb.perKey == nil {
			qb.perKey = make(map[string]int)
		}
		n := qb.perKey[p.Key] + len(p.Messages)
		qb.perKey[p.Key] = n
		qb.fullest = max(qb.fullest, n)
	}
	qb.last = now
	b.count += len(p.Messages)
	return true
}

// seal makes every later add fail.
func (b *buffer) seal() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sealed.Store(true)
}

// take removes and returns the queue buffers that are due at now: full (MaxBatchMessages
// reached; on an ordered queue, by one key), quiet for the window, or older than the cap. all takes every buffer. Their messages
// stay counted until stored is called.
func (b *buffer) take(now time.Time, all bool) []*queueBuffer {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*queueBuffer
	for spec, qb := range b.queues {
		if all || qb.full() || now.Sub(qb.last) >= b.window || now.Sub(qb.first) >= b.limit {
			out = append(out, qb)
			delete(b.queues, spec)
			b.flights.take(qb)
		}
	}
	return out
}

// takeKey waits (until ctx ends) for the flushes that took publishes of spec's ordering key
// key to store them, then removes the key's publishes still in the buffer and returns them as
// a queue buffer of their own, with a flight of its own (nil when there are none). A transaction
// that stages a batch of the key calls it first, so that the key's direct publishes, made
// before, reach the backend (or the outbox) before the transaction's row can.
func (b *buffer) takeKey(ctx context.Context, spec *Spec, key string) *queueBuffer {
	k := [2]string{spec.Name, key}
	b.mu.Lock()
wait:
	for f := b.flights.latest[k]; f != nil; f = b.flights.latest[k] {
		b.mu.Unlock()
		select {
		case <-f.done:
			b.mu.Lock()
		case <-ctx.Done():
			b.mu.Lock()
			break wait // no longer: the caller goes on
		}
	}
	defer b.mu.Unlock()
	qb := b.queues[spec]
	if qb == nil || qb.perKey[key] == 0 {
		return nil
	}
	out := &queueBuffer{spec: spec, first: qb.first, last: qb.last}
	rest := qb.pending[:0:0]
	qb.perKey, qb.fullest, qb.messages = make(map[string]int, len(qb.perKey)), 0, 0
	for _, p := range qb.pending {
		if p.Key == key {
			out.pending = append(out.pending, p)
			out.messages += len(p.Messages)
			continue
		}
		rest = append(rest, p)
		qb.messages += len(p.Messages)
		n := qb.perKey[p.Key] + len(p.Messages)
		qb.perKey[p.Key] = n
		qb.fullest = max(qb.fullest, n)
	}
	qb.pending = rest
	if len(rest) == 0 {
		delete(b.queues, spec)
	}
	b.flights.take(out)
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

// discard seals the buffer and forgets what it holds (a simulated crash). Messages taken by a
// flush in progress stay counted until that flush calls stored.
func (b *buffer) discard() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sealed.Store(true)
	for _, qb := range b.queues {
		b.count -= qb.messages
	}
	b.queues = make(map[*Spec]*queueBuffer)
}
