package drain_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
)

// counting wraps a backend, counts Fetch, Publish, Depths and Close calls, and does not close the
// wrapped backend (several drain wrappers share one memory backend, as processes share a
// server); the test closes it.
type counting struct {
	core.Backend
	fetches, publishes, closes, depths atomic.Int64
}

func (c *counting) Depths(ctx context.Context, queues []string) (map[string]core.Depth, error) {
	c.depths.Add(1)
	return c.Backend.Depths(ctx, queues)
}

func (c *counting) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	c.fetches.Add(1)
	return c.Backend.Fetch(ctx, req)
}

func (c *counting) Publish(ctx context.Context, b core.OutgoingBatch) error {
	c.publishes.Add(1)
	return c.Backend.Publish(ctx, b)
}

func (c *counting) Close() error { c.closes.Add(1); return nil }

// Unwrap returns the wrapped backend, so that its optional interfaces (core.KeyOrderer,
// core.KeyHolder) are found through the counter.
func (c *counting) Unwrap() core.Backend { return c.Backend }

// newMemory returns a memory backend closed at the end of the test.
func newMemory(t *testing.T) *memory.Backend {
	t.Helper()
	be := memory.New(nil)
	t.Cleanup(func() { _ = be.Close() })
	return be
}

// rawBatch encodes a batch of string messages.
func rawBatch(queue string, exclusive bool, msgs ...string) core.OutgoingBatch {
	env := &envelope.Envelope{ID: core.NewID(), Queue: queue, Created: time.Now()}
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		env.MessageIDs = append(env.MessageIDs, core.NewID())
		env.Messages = append(env.Messages, b)
	}
	return core.OutgoingBatch{ID: env.ID, Queue: queue, Body: envelope.Encode(env), Exclusive: exclusive, Messages: len(msgs)}
}

func publish(t *testing.T, b core.Backend, batches ...core.OutgoingBatch) {
	t.Helper()
	for _, bt := range batches {
		if err := b.Publish(context.Background(), bt); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
}

func fetch(t *testing.T, b core.Backend, qs ...core.QueueSlots) []*core.Claim {
	t.Helper()
	cs, err := b.Fetch(context.Background(), core.FetchRequest{Node: "t-" + core.NewID(), Queues: qs, Lease: 10 * time.Second})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	return cs
}

func depth(t *testing.T, b core.Backend, queue string) core.Depth {
	t.Helper()
	d, err := b.Depths(context.Background(), []string{queue})
	if err != nil {
		t.Fatalf("Depths: %v", err)
	}
	return d[queue].Counts() // OldestReady is checked by the Depth tests
}

func eventually(t *testing.T, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// concurrency tracks the peak number of concurrent runs.
type concurrency struct {
	mu        sync.Mutex
	now, peak int
}

func (c *concurrency) enter() {
	c.mu.Lock()
	c.now++
	c.peak = max(c.peak, c.now)
	c.mu.Unlock()
}

func (c *concurrency) leave() {
	c.mu.Lock()
	c.now--
	c.mu.Unlock()
}

func (c *concurrency) max() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak
}
