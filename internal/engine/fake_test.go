package engine_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"

	"github.com/txmq/txmq/core"
)

// fakeBackend records what the engine asks of a backend; tests drive claims by hand.
type fakeBackend struct {
	mu         sync.Mutex
	published  []core.OutgoingBatch
	acked      []*core.Claim
	retried    []fakeRetry
	dropped    []string
	publishErr error
	extendErr  error
	extends    int

	// Optional overrides, for driver and lifecycle tests.
	fetchFn   func(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error)
	publishFn func(ctx context.Context, b core.OutgoingBatch) error
	// opFn, if set, is called first by Ack, Retry, Drop and Extend with the op's name; a
	// non-nil error fails the call. calls counts every such call by op.
	opFn  func(ctx context.Context, op string) error
	calls map[string]int
	// granted, if set, is the lease Extend grants whatever is asked (a JetStream AckWait).
	granted time.Duration
}

// op records a call of op and returns opFn's verdict.
func (f *fakeBackend) op(ctx context.Context, op string) error {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
	fn := f.opFn
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, op)
	}
	return nil
}

// callCount returns how many times op was called.
func (f *fakeBackend) callCount(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

type fakeRetry struct {
	claim *core.Claim
	body  []byte
	delay time.Duration
}

func (f *fakeBackend) Publish(ctx context.Context, b core.OutgoingBatch) error {
	if f.publishFn != nil {
		if err := f.publishFn(ctx, b); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.publishErr != nil {
		return f.publishErr
	}
	f.published = append(f.published, b)
	return nil
}

func (f *fakeBackend) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	if f.fetchFn != nil {
		return f.fetchFn(ctx, req)
	}
	select {
	case <-ctx.Done():
	case <-time.After(req.Wait):
	}
	return nil, nil
}

func (f *fakeBackend) Ack(ctx context.Context, c *core.Claim) error {
	if err := f.op(ctx, "Ack"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acked = append(f.acked, c)
	return nil
}

func (f *fakeBackend) Retry(ctx context.Context, c *core.Claim, body []byte, delay time.Duration) error {
	if err := f.op(ctx, "Retry"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retried = append(f.retried, fakeRetry{c, body, delay})
	return nil
}

func (f *fakeBackend) Drop(ctx context.Context, _ *core.Claim, reason string) error {
	if err := f.op(ctx, "Drop"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropped = append(f.dropped, reason)
	return nil
}

func (f *fakeBackend) Extend(ctx context.Context, c *core.Claim, lease time.Duration) error {
	if err := f.op(ctx, "Extend"); err != nil {
		return err
	}
	f.mu.Lock()
	f.extends++
	err := f.extendErr
	if f.granted > 0 {
		lease = f.granted
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	c.LeaseUntil = time.Now().Add(lease)
	return nil
}

func (f *fakeBackend) Depths(context.Context, []string) (map[string]core.Depth, error) {
	return nil, nil
}
func (f *fakeBackend) Close() error { return nil }

// counts returns how many batches were acked, retried and dropped.
func (f *fakeBackend) counts() (acked, retried, dropped int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.acked), len(f.retried), len(f.dropped)
}

func (f *fakeBackend) batches() []core.OutgoingBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]core.OutgoingBatch(nil), f.published...)
}

// fakeSink records dead letters.
type fakeSink struct {
	mu   sync.Mutex
	got  []*core.DeadLetter
	err  error
	boom bool
}

func (s *fakeSink) DeadLetter(_ context.Context, dl *core.DeadLetter) error {
	if s.boom {
		panic("sink exploded")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, dl)
	return s.err
}

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

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

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
