package engine

import (
	"context"
	"slices"
)

// Flights keep one ordered key's flushes in order. The buffer is taken by the flusher every
// tick, so two flushes of one key can be writing at once (the first still storing a full
// buffer's batches when the next tick takes what came after); each flush of an ordered key
// is a flight, and a flight stores its batches only once the key's previous flight has
// landed (stored, handed off or dropped every batch). A transaction that stages a batch of
// the key waits for the key's latest flight (buffer.takeKey), so its row cannot overtake
// them either.

// flight is one flush's publishes of one ordered key; done is closed when they landed.
type flight struct {
	prev chan struct{} // the done of the key's flight before this one (nil: none)
	done chan struct{}
	key  [2]string
}

// flights tracks the flights of ordered keys that have not landed, under the buffer's mu.
type flights struct {
	latest map[[2]string]*flight // per {queue, key}, its newest flight
}

// take gives each ordered key of qb, just taken from the buffer, a flight behind the key's
// latest one. Call it under the buffer's mu.
func (fs *flights) take(qb *queueBuffer) {
	if !qb.spec.Ordered {
		return
	}
	for _, p := range qb.pending {
		if qb.flights[p.Key] != nil {
			continue
		}
		if qb.flights == nil {
			qb.flights = make(map[string]*flight)
		}
		if fs.latest == nil {
			fs.latest = make(map[[2]string]*flight)
		}
		k := [2]string{qb.spec.Name, p.Key}
		f := &flight{done: make(chan struct{}), key: k}
		if p := fs.latest[k]; p != nil {
			f.prev = p.done
		}
		fs.latest[k] = f
		qb.flights[p.Key] = f
	}
}

// land marks f landed, under the buffer's mu; landing twice is harmless.
func (fs *flights) land(f *flight) {
	select {
	case <-f.done:
		return
	default:
	}
	close(f.done)
	if fs.latest[f.key] == f {
		delete(fs.latest, f.key)
	}
}

// waitPrev waits until the flight before f, if any, has landed, or ctx ends.
func (f *flight) waitPrev(ctx context.Context) {
	if f == nil || f.prev == nil {
		return
	}
	select {
	case <-f.prev:
	case <-ctx.Done():
	}
}

// landed lands every flight of qbs (a flush's end: stored, handed off or dropped).
func (b *buffer) landed(qbs []*queueBuffer) {
	if !slices.ContainsFunc(qbs, func(qb *queueBuffer) bool { return len(qb.flights) > 0 }) {
		return // no ordered key: the flush's hot path takes no lock here
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, qb := range qbs {
		for _, f := range qb.flights {
			b.flights.land(f)
		}
	}
}

// landOne lands f (one key's lane of a flush is stored).
func (b *buffer) landOne(f *flight) {
	if f == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flights.land(f)
}
