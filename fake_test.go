package txmq

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

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

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestNode returns an unstarted node on a fake backend with a fresh registry.
func newTestNode(t *testing.T, opts *NodeOptions) (*Node, *fakeBackend) {
	t.Helper()
	fb := &fakeBackend{}
	return newTestNodeOn(t, fb, opts), fb
}

// newTestNodeOn returns an unstarted node on backend with a fresh registry.
func newTestNodeOn(t *testing.T, backend core.Backend, opts *NodeOptions) *Node {
	t.Helper()
	o := NodeOptions{}
	if opts != nil {
		o = *opts
	}
	if o.Registry == nil {
		o.Registry = NewRegistry()
	}
	o.Logger = quietLogger()
	n, err := NewNode(backend, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

// fakeTx records what core routes into an app transaction.
type fakeTx struct {
	mu          sync.Mutex
	staged      []*core.Pending
	afterCommit []func()
	noCommit    bool // an app-managed transaction that cannot report its commit
}

func (tx *fakeTx) Stage(_ context.Context, p *core.Pending) error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.staged = append(tx.staged, p)
	return nil
}

func (tx *fakeTx) AfterCommit(fn func()) bool {
	if tx.noCommit {
		return false
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.afterCommit = append(tx.afterCommit, fn)
	return true
}

type handoffRecorder struct {
	mu  sync.Mutex
	got []core.OutgoingBatch
	err error
}

func (h *handoffRecorder) Handoff(_ context.Context, bs []core.OutgoingBatch) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	h.got = append(h.got, bs...)
	return nil
}

// rejectsDecode encodes fine but never decodes back.
type rejectsDecode struct{ V int }

func (r *rejectsDecode) UnmarshalJSON([]byte) error { return errors.New("no way back") }
