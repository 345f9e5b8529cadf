package engine_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCloseReleasesClaimsOfTheInterruptedFetch: Close interrupts a waiting Fetch, and the adapter
// returns a claim it had already made (as the contract requires). The node must not start that
// batch after stopping: it gives it back at once, before Close returns, without spending a run.
func TestCloseReleasesClaimsOfTheInterruptedFetch(t *testing.T) {
	t.Parallel()
	fetching := make(chan struct{}, 1) // buffered: the first Fetch may start before the test waits
	fb := &fakeBackend{}
	fb.FetchFn = func(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
		select {
		case fetching <- struct{}{}:
		default:
		}
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // the claim lands just after the interruption
		return []*core.Claim{{Queue: "q", ID: "b", Body: batchBody(t, 0, "1"), Deliveries: 1, LeaseUntil: time.Now().Add(time.Minute)}}, nil
	}
	n := newTestNodeOn(t, fb, nil)
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	var ran atomic.Int32
	if err := q.Listen(n, func(context.Context, []int) error {
		ran.Add(1)
		time.Sleep(100 * time.Millisecond)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-fetching
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	acked, retried, dropped := fb.Counts()
	if ran.Load() != 0 || acked != 0 || retried != 1 || dropped != 0 {
		t.Fatalf("after Close: listener ran %d times, acked %d, retried %d, dropped %d; want the claim released (retried once) and never run", ran.Load(), acked, retried, dropped)
	}
	fb.Mu.Lock()
	r := fb.Retried[0]
	fb.Mu.Unlock()
	if e, err := envelope.Decode(r.Body); err != nil || e.Attempt != 0 || r.Delay != 0 {
		t.Fatalf("released with delay %v and body %+v (%v); want delay 0 and attempt 0", r.Delay, e, err)
	}
}

// TestPublishRacingCloseIsNotLost: a publish that checked the node was open, then lost the CPU
// until Close had finished, must still reach the backend (or fail), never sit in a buffer that
// nobody flushes any more.
func TestPublishRacingCloseIsNotLost(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	n, fb := newTestNode(t, &txmq.NodeOptions{Clock: clock})
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	block, entered := make(chan struct{}), make(chan struct{})
	clock.mu.Lock()
	clock.block, clock.entered = block, entered
	clock.mu.Unlock()
	published := make(chan error, 1)
	go func() { published <- q.Publish(context.Background(), n, 1) }()
	<-entered // the publish is past its checks, about to buffer
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(block)
	err := <-published
	if err == nil && len(fb.Batches()) != 1 {
		t.Fatalf("Publish returned nil but the message never reached the backend (buffered: %d)", n.Stats().Buffered)
	}
	if err != nil && !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Publish: %v", err)
	}
}

// TestListenerPublishesWhileClosing: a listener that Close is waiting for may still publish
// follow-up messages; they reach the backend before Close returns.
func TestListenerPublishesWhileClosing(t *testing.T) {
	t.Parallel()
	n, fb := newTestNode(t, nil)
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	next := txmq.MustDeclareIn(n.Registry(), "next", txmq.QueueConfig[int]{Transactional: txmq.Try})
	closing := make(chan struct{})
	var pubErr atomic.Value
	if err := q.Listen(n, func(ctx context.Context, msgs []int) error {
		<-closing
		time.Sleep(20 * time.Millisecond) // Close is now waiting for this listener
		err := next.Publish(ctx, n, msgs[0]+1)
		pubErr.Store(errText(err))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	go func() {
		defer close(started)
		engine.Of(n).Deliver(&core.Claim{Queue: "q", ID: "b", Body: batchBody(t, 0, "1"), Deliveries: 1, LeaseUntil: time.Now().Add(time.Minute)})
	}()
	waitFor(t, "the listener to run", func() bool { return n.Stats().Runs == 1 })
	close(closing)
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-started
	if e := pubErr.Load(); e != "" {
		t.Fatalf("a listener's publish during Close failed: %v", e)
	}
	if got := len(fb.Batches()); got != 1 {
		t.Fatalf("%d batches stored when Close returned, want the follow-up message's 1", got)
	}
	if acked, _, _ := fb.Counts(); acked != 1 {
		t.Fatalf("acked %d, want 1", acked)
	}
}

// TestHaltDuringFlushKeepsCountsRight: halt discards the buffer while a flush is in flight;
// Buffered must not go negative when that flush ends.
func TestHaltDuringFlushKeepsCountsRight(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	inPublish := make(chan struct{}, 1)
	fb := &fakeBackend{PublishFn: func(context.Context, core.OutgoingBatch) error {
		inPublish <- struct{}{}
		<-release
		return nil
	}}
	n := newTestNodeOn(t, fb, &txmq.NodeOptions{FlushWindow: time.Millisecond, FlushTick: time.Millisecond})
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	_ = q.Publish(context.Background(), n, 1)
	<-inPublish
	halted := make(chan struct{})
	go func() { engine.Of(n).Halt(); close(halted) }()
	waitFor(t, "halt to discard the buffer", func() bool { return engine.Of(n).Halted() })
	time.Sleep(10 * time.Millisecond)
	close(release)
	<-halted
	if b := n.Stats().Buffered; b != 0 {
		t.Fatalf("Buffered = %d after halt and the in-flight flush, want 0", b)
	}
}

// TestCloseTwiceWaits: a second Close waits for the first to finish.
func TestCloseTwiceWaits(t *testing.T) {
	t.Parallel()
	n, fb := newTestNode(t, nil)
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	release := make(chan struct{})
	if err := q.Listen(n, func(context.Context, []int) error { <-release; return nil }); err != nil {
		t.Fatal(err)
	}
	go func() {
		engine.Of(n).Deliver(&core.Claim{Queue: "q", ID: "b", Body: batchBody(t, 0, "1"), Deliveries: 1, LeaseUntil: time.Now().Add(time.Minute)})
	}()
	waitFor(t, "the listener to run", func() bool { return n.Stats().Runs == 1 })
	first := make(chan error, 1)
	go func() { first <- n.Close(context.Background()) }()
	waitFor(t, "the first Close to start", func() bool { return engine.Of(n).Closing() })
	second := make(chan error, 1)
	go func() { second <- n.Close(context.Background()) }()
	select {
	case <-second:
		t.Fatal("the second Close returned while the first was still waiting for a listener")
	case <-time.After(30 * time.Millisecond):
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if acked, _, _ := fb.Counts(); acked != 1 {
		t.Fatalf("acked %d", acked)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		setup func(n *txmq.Node)
		ctx   context.Context
		want  error
		text  string
	}{
		{"cancelled ctx", func(*txmq.Node) {}, cancelled, context.Canceled, "Start"},
		{"twice", func(n *txmq.Node) { _ = n.Start(context.Background()) }, context.Background(), core.ErrInvalidConfig, "once"},
		{"after Close", func(n *txmq.Node) { _ = n.Close(context.Background()) }, context.Background(), core.ErrClosed, "new node"},
		{"after Halt", func(n *txmq.Node) { engine.Of(n).Halt() }, context.Background(), core.ErrClosed, "new node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, _ := newTestNode(t, nil)
			tt.setup(n)
			err := n.Start(tt.ctx)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), n.ID()) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("Start: %v; want %v naming the node and saying %q", err, tt.want, tt.text)
			}
		})
	}
}

// nodeGoroutines counts the goroutines running the engine's code (a node's loops, flushes,
// fetches, workers and the listeners they call), not this test package's own.
func nodeGoroutines() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "txmq/internal/engine.") {
			count++
		}
	}
	return count
}

// TestNoGoroutinesAfterClose runs a node through publish, delivery and Close, including a
// listener that outlives Close's deadline, and checks that none of its goroutines is left. Not
// parallel: it counts every node goroutine of the process.
func TestNoGoroutinesAfterClose(t *testing.T) {
	for _, halt := range []bool{false, true} {
		before := nodeGoroutines()
		fb := &fakeBackend{}
		claims := make(chan *core.Claim, 4)
		fb.FetchFn = func(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
			select {
			case c := <-claims:
				return []*core.Claim{c}, nil
			case <-ctx.Done():
				return nil, nil
			case <-time.After(req.Wait):
				return nil, nil
			}
		}
		n := newTestNodeOn(t, fb, &txmq.NodeOptions{FlushTick: time.Millisecond, FlushWindow: time.Millisecond})
		q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
		if err := q.Listen(n, func(ctx context.Context, msgs []int) error {
			if msgs[0] == 2 {
				<-ctx.Done() // outlives Close's deadline
				return ctx.Err()
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		_ = q.Publish(context.Background(), n, 1)
		claims <- &core.Claim{Queue: "q", ID: "a", Body: batchBody(t, 0, "1"), Deliveries: 1, LeaseUntil: time.Now().Add(time.Minute)}
		claims <- &core.Claim{Queue: "q", ID: "b", Body: batchBody(t, 0, "2"), Deliveries: 1, LeaseUntil: time.Now().Add(time.Minute)}
		waitFor(t, "both runs", func() bool { return n.Stats().Runs == 2 })
		if running := nodeGoroutines(); running <= before {
			// The count must see the running node, or the check below could never fail.
			t.Fatalf("%d engine goroutines while the node runs, %d before it started", running, before)
		}
		if halt {
			engine.Of(n).Halt()
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			if err := n.Close(ctx); err == nil {
				t.Fatal("Close with a listener running past its deadline returned nil")
			}
			cancel()
		}
		waitFor(t, "node goroutines to end", func() bool { return nodeGoroutines() <= before })
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
