// Package fakes holds the test doubles that the app API's tests (package txmq) and the
// engine's (package engine_test) share: a backend that records what it is asked, a
// dead-letter sink, an app transaction and a quiet logger. It is imported by tests only, and
// imports only core.
package fakes

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

// Backend records what the engine asks of a backend; tests drive claims by hand. Its zero
// value stores every publish and fetches nothing.
type Backend struct {
	Mu         sync.Mutex
	Published  []core.OutgoingBatch
	Acked      []*core.Claim
	Retried    []Retry
	Dropped    []string
	PublishErr error
	ExtendErr  error
	Extends    int

	// Optional overrides, for driver and lifecycle tests.
	FetchFn   func(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error)
	PublishFn func(ctx context.Context, b core.OutgoingBatch) error
	// OpFn, if set, is called first by Ack, Retry, Drop and Extend with the op's name; a
	// non-nil error fails the call. Calls counts every such call by op.
	OpFn  func(ctx context.Context, op string) error
	Calls map[string]int
	// Granted, if set, is the lease Extend grants whatever is asked (a JetStream AckWait).
	Granted time.Duration
}

// Retry is one Retry call a Backend received.
type Retry struct {
	Claim *core.Claim
	Body  []byte
	Delay time.Duration
}

// op records a call of op and returns OpFn's verdict.
func (f *Backend) op(ctx context.Context, op string) error {
	f.Mu.Lock()
	if f.Calls == nil {
		f.Calls = map[string]int{}
	}
	f.Calls[op]++
	fn := f.OpFn
	f.Mu.Unlock()
	if fn != nil {
		return fn(ctx, op)
	}
	return nil
}

// CallCount returns how many times op was called.
func (f *Backend) CallCount(op string) int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.Calls[op]
}

// Publish implements core.Backend: PublishFn's error, else PublishErr, else the batch is kept.
func (f *Backend) Publish(ctx context.Context, b core.OutgoingBatch) error {
	if f.PublishFn != nil {
		if err := f.PublishFn(ctx, b); err != nil {
			return err
		}
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.PublishErr != nil {
		return f.PublishErr
	}
	f.Published = append(f.Published, b)
	return nil
}

// Fetch implements core.Backend: FetchFn's answer, else nothing after req.Wait (or once ctx
// ends).
func (f *Backend) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	if f.FetchFn != nil {
		return f.FetchFn(ctx, req)
	}
	select {
	case <-ctx.Done():
	case <-time.After(req.Wait):
	}
	return nil, nil
}

// Ack implements core.Backend.
func (f *Backend) Ack(ctx context.Context, c *core.Claim) error {
	if err := f.op(ctx, "Ack"); err != nil {
		return err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Acked = append(f.Acked, c)
	return nil
}

// Retry implements core.Backend.
func (f *Backend) Retry(ctx context.Context, c *core.Claim, body []byte, delay time.Duration) error {
	if err := f.op(ctx, "Retry"); err != nil {
		return err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Retried = append(f.Retried, Retry{c, body, delay})
	return nil
}

// Drop implements core.Backend.
func (f *Backend) Drop(ctx context.Context, _ *core.Claim, reason string) error {
	if err := f.op(ctx, "Drop"); err != nil {
		return err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Dropped = append(f.Dropped, reason)
	return nil
}

// Extend implements core.Backend: ExtendErr, else the claim's lease ends Granted (or lease)
// from now.
func (f *Backend) Extend(ctx context.Context, c *core.Claim, lease time.Duration) error {
	if err := f.op(ctx, "Extend"); err != nil {
		return err
	}
	f.Mu.Lock()
	f.Extends++
	err := f.ExtendErr
	if f.Granted > 0 {
		lease = f.Granted
	}
	f.Mu.Unlock()
	if err != nil {
		return err
	}
	c.LeaseUntil = time.Now().Add(lease)
	return nil
}

// Depths implements core.Backend: none known.
func (f *Backend) Depths(context.Context, []string) (map[string]core.Depth, error) {
	return nil, nil
}

// Close implements core.Backend.
func (f *Backend) Close() error { return nil }

// Counts returns how many batches were acked, retried and dropped.
func (f *Backend) Counts() (acked, retried, dropped int) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return len(f.Acked), len(f.Retried), len(f.Dropped)
}

// Batches returns a copy of the batches published.
func (f *Backend) Batches() []core.OutgoingBatch {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return append([]core.OutgoingBatch(nil), f.Published...)
}

// Sink records dead letters (a core.DeadLetterSink): it returns Err, and panics when Boom is
// set.
type Sink struct {
	Mu   sync.Mutex
	Got  []*core.DeadLetter
	Err  error
	Boom bool
}

// DeadLetter implements core.DeadLetterSink.
func (s *Sink) DeadLetter(_ context.Context, dl *core.DeadLetter) error {
	if s.Boom {
		panic("sink exploded")
	}
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Got = append(s.Got, dl)
	return s.Err
}

// Tx records what the engine routes into an app transaction (a core.Tx).
type Tx struct {
	Mu           sync.Mutex
	Staged       []*core.Pending
	AfterCommits []func()
	// NoCommit: an app-managed transaction that cannot report its commit.
	NoCommit bool
}

// Stage implements core.Tx.
func (tx *Tx) Stage(_ context.Context, p *core.Pending) error {
	tx.Mu.Lock()
	defer tx.Mu.Unlock()
	tx.Staged = append(tx.Staged, p)
	return nil
}

// AfterCommit implements core.Tx.
func (tx *Tx) AfterCommit(fn func()) bool {
	if tx.NoCommit {
		return false
	}
	tx.Mu.Lock()
	defer tx.Mu.Unlock()
	tx.AfterCommits = append(tx.AfterCommits, fn)
	return true
}

// QuietLogger returns a logger that writes nowhere.
func QuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Handoff records the batches handed to the outbox (a core.Handoff); it returns Err instead
// when set.
type Handoff struct {
	Mu  sync.Mutex
	Got []core.OutgoingBatch
	Err error
}

// Handoff implements core.Handoff.
func (h *Handoff) Handoff(_ context.Context, bs []core.OutgoingBatch) error {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	if h.Err != nil {
		return h.Err
	}
	h.Got = append(h.Got, bs...)
	return nil
}
