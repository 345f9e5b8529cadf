package engine_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/internal/fakes"

	"github.com/txmq/txmq/core"
)

// The shared fakes (package fakes), under the names these tests use.
type (
	fakeBackend = fakes.Backend
	fakeSink    = fakes.Sink
	fakeTx      = fakes.Tx
	// handoffRecorder records what is handed to the outbox.
	handoffRecorder = fakes.Handoff
)

// fakeClock is a settable clock. When block is set, the next Now call reports on entered and
// waits for block to be closed.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	block   chan struct{}
	entered chan struct{}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	block, entered := c.block, c.entered
	c.block, c.entered = nil, nil
	c.mu.Unlock()
	if block != nil {
		close(entered)
		<-block
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func quietLogger() *slog.Logger { return fakes.QuietLogger() }

// newTestNode returns an unstarted node on a fake backend with a fresh registry.
func newTestNode(t *testing.T, opts *txmq.NodeOptions) (*txmq.Node, *fakeBackend) {
	t.Helper()
	fb := &fakeBackend{}
	return newTestNodeOn(t, fb, opts), fb
}

// newTestNodeOn returns an unstarted node on backend with a fresh registry.
func newTestNodeOn(t *testing.T, backend core.Backend, opts *txmq.NodeOptions) *txmq.Node {
	t.Helper()
	o := txmq.NodeOptions{}
	if opts != nil {
		o = *opts
	}
	if o.Registry == nil {
		o.Registry = txmq.NewRegistry()
	}
	o.Logger = quietLogger()
	n, err := txmq.NewNode(backend, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}
