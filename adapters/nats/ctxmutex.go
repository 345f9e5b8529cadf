package nats

import (
	"context"
	"sync"
)

// ctxMutex is a mutex whose lock can also be waited for within a context (lockCtx): Depths
// waits for a setup in progress in this Backend within one call's bound (see Backend.depth).
// The zero value is unlocked.
type ctxMutex struct {
	once sync.Once
	ch   chan struct{} // holds one token while locked
}

func (m *ctxMutex) tokens() chan struct{} {
	m.once.Do(func() { m.ch = make(chan struct{}, 1) })
	return m.ch
}

// Lock locks m, waiting as long as it takes.
func (m *ctxMutex) Lock() { m.tokens() <- struct{}{} }

// lockCtx locks m, or returns ctx's error when ctx ends first (m is then not locked).
func (m *ctxMutex) lockCtx(ctx context.Context) error {
	select {
	case m.tokens() <- struct{}{}:
		return nil
	default:
	}
	select {
	case m.tokens() <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unlock unlocks m; unlocking an unlocked ctxMutex panics, as with sync.Mutex.
func (m *ctxMutex) Unlock() {
	select {
	case <-m.tokens():
	default:
		panic("nats: unlock of an unlocked ctxMutex")
	}
}
