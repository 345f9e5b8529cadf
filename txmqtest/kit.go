package txmqtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
)

// Test-friendly node settings applied by NodeDefaults to zero fields.
const (
	// Lease is the test lease: short, so a crashed node's batch comes back within about a second.
	Lease = time.Second
	// PollWait bounds one Fetch; short so a raised cap func is noticed soon.
	PollWait = 200 * time.Millisecond
	// FlushWindow is the test publish window (the production default is 20 ms).
	FlushWindow = 5 * time.Millisecond
	// FlushTick is how often a test node's flusher looks at its buffer.
	FlushTick = 2 * time.Millisecond
	// CloseTimeout bounds the Close each node made by the kit gets in t.Cleanup.
	CloseTimeout = 10 * time.Second
)

// Backoff is the test retry backoff: 10 ms doubling to 50 ms, with the engine's ±20% jitter.
var Backoff = txmq.ExponentialBackoff(10*time.Millisecond, 50*time.Millisecond)

// Options configures a Kit. A nil *Options means every default.
type Options struct {
	// DuplicateDelivery stores every published batch twice (see Duplicate), so every message
	// is delivered at least twice: listeners that are not idempotent fail their tests.
	DuplicateDelivery bool
	// Log sends node logs to t.Log; by default nodes log nothing.
	Log bool
	// Memory configures the memory backend (nil: defaults).
	Memory *memory.Options
}

// Kit is an isolated txmq world for one test: its own registry, its own memory backend and
// helpers that make started nodes closed at the end of the test.
type Kit struct {
	// T is the test the kit belongs to.
	T testing.TB
	// Registry is a fresh registry: declare the test's queues in it.
	Registry *txmq.Registry
	// Memory is the memory backend under Backend (Break and Restore simulate an outage).
	Memory *memory.Backend
	// Backend is what nodes use: Memory, wrapped by Duplicate under DuplicateDelivery.
	Backend core.Backend
	// DeadLetters records every batch the kit's nodes dead-letter.
	DeadLetters *DeadLetterRecorder
	// Logger is the logger the kit's nodes use.
	Logger *slog.Logger
}

// New returns a Kit for t. The backend is closed and every node made by the kit is closed in
// t.Cleanup.
func New(t testing.TB, opts *Options) *Kit {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	mem := memory.New(o.Memory)
	t.Cleanup(func() { _ = mem.Close() })
	k := &Kit{T: t, Registry: txmq.NewRegistry(), Memory: mem, Backend: mem, DeadLetters: &DeadLetterRecorder{}}
	if o.DuplicateDelivery {
		k.Backend = Duplicate(mem)
	}
	if o.Log {
		k.Logger = TestLogger(t)
	} else {
		k.Logger = DiscardLogger()
	}
	return k
}

// NodeDefaults fills the zero fields of o with test-friendly settings: the short Lease,
// PollWait, FlushWindow and FlushTick above, the fast Backoff, FlushCap 1 s, ClaimTimeout 5 s
// and a logger that discards. It is what Kit.Node and the parity suite use.
func NodeDefaults(o *txmq.NodeOptions) {
	if o.Lease == 0 {
		o.Lease = Lease
	}
	if o.PollWait == 0 {
		o.PollWait = PollWait
	}
	if o.FlushWindow == 0 {
		o.FlushWindow = FlushWindow
	}
	if o.FlushTick == 0 {
		o.FlushTick = FlushTick
	}
	if o.FlushCap == 0 {
		o.FlushCap = time.Second
	}
	if o.ClaimTimeout == 0 {
		o.ClaimTimeout = 5 * time.Second
	}
	if o.Backoff == nil {
		o.Backoff = Backoff
	}
	if o.Logger == nil {
		o.Logger = DiscardLogger()
	}
}

// Node returns a started node on the kit's backend and registry, closed in t.Cleanup. opts
// may be nil; its zero fields get the kit's registry, dead-letter recorder, logger
// and NodeDefaults. Listeners may be added after Start.
func (k *Kit) Node(opts *txmq.NodeOptions) *txmq.Node {
	k.T.Helper()
	var o txmq.NodeOptions
	if opts != nil {
		o = *opts
	}
	if o.Registry == nil {
		o.Registry = k.Registry
	}
	if o.DeadLetters == nil {
		o.DeadLetters = k.DeadLetters
	}
	if o.Logger == nil {
		o.Logger = k.Logger
	}
	return StartNode(k.T, k.Backend, &o)
}

// StartNode makes a node on backend with NodeDefaults applied to a copy of opts (nil: none),
// starts it and closes it in t.Cleanup (within CloseTimeout). It fails the test if the node
// cannot be made.
func StartNode(t testing.TB, backend core.Backend, opts *txmq.NodeOptions) *txmq.Node {
	t.Helper()
	var o txmq.NodeOptions
	if opts != nil {
		o = *opts
	}
	NodeDefaults(&o)
	n, err := txmq.NewNode(backend, &o)
	if err != nil {
		t.Fatalf("txmqtest: txmq.NewNode: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), CloseTimeout)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			t.Errorf("txmqtest: closing node %s: %v", n.ID(), err)
		}
	})
	if err := n.Start(context.Background()); err != nil {
		t.Fatalf("txmqtest: starting node: %v", err)
	}
	return n
}

// Declare declares a queue in the kit's registry, failing the test on error.
func DeclareIn[T any](k *Kit, name string, cfg txmq.QueueConfig[T]) *txmq.Queue[T] {
	k.T.Helper()
	q, err := txmq.DeclareIn(k.Registry, name, cfg)
	if err != nil {
		k.T.Fatalf("txmqtest: declaring %q: %v", name, err)
	}
	return q
}

// WaitIdle waits until nodes are idle; see the package function.
func (k *Kit) WaitIdle(nodes ...*txmq.Node) {
	k.T.Helper()
	WaitIdle(k.T, nodes...)
}

// Eventually polls cond; see the package function.
func (k *Kit) Eventually(timeout time.Duration, cond func() bool, msgAndArgs ...any) {
	k.T.Helper()
	Eventually(k.T, timeout, cond, msgAndArgs...)
}

// pollEvery is the Eventually and WaitIdle polling period.
const pollEvery = 10 * time.Millisecond

// Eventually calls cond every 10 ms until it returns true, and fails the test (t.Fatalf) if
// it has not within timeout. msgAndArgs, if any, is a format string and its arguments that
// describe what was awaited, or one func() string called at the failure to describe the state
// then. Call it from the test goroutine.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("txmqtest: not true within %v: %s", timeout, describeMsg(msgAndArgs))
		}
		time.Sleep(pollEvery)
	}
}

func describeMsg(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return "condition"
	}
	if f, ok := msgAndArgs[0].(func() string); ok {
		return f()
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(f, msgAndArgs[1:]...)
	}
	return fmt.Sprint(msgAndArgs...)
}

// IdleTimeout is how long WaitIdle waits.
const IdleTimeout = 20 * time.Second

// WaitIdle waits until every node is idle: no batch in flight on it (Stats().InFlight == 0),
// nothing in its publish buffer (Stats().Buffered == 0), and every queue of its registry at
// zero depth in its backend (ready, in flight and delayed). It needs two consecutive idle
// observations, because a single one races the fetch loop (a claim on its way to a worker is
// counted nowhere for an instant). It fails the test after IdleTimeout.
func WaitIdle(t testing.TB, nodes ...*txmq.Node) {
	t.Helper()
	deadline := time.Now().Add(IdleTimeout)
	streak := 0
	var last string
	for streak < 2 {
		if busy := idle(nodes); busy == "" {
			streak++
		} else {
			streak, last = 0, busy
		}
		if streak >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("txmqtest: nodes not idle within %v: %s", IdleTimeout, last)
		}
		time.Sleep(pollEvery)
	}
}

// idle returns "" when nodes are idle, or what is still busy.
func idle(nodes []*txmq.Node) string {
	for _, n := range nodes {
		s := n.Stats()
		if s.InFlight != 0 || s.Buffered != 0 {
			return fmt.Sprintf("node %s: %d in flight, %d buffered", n.ID(), s.InFlight, s.Buffered)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		depths, err := n.Depths(ctx)
		cancel()
		if err != nil {
			return fmt.Sprintf("node %s: depths: %v", n.ID(), err)
		}
		for q, d := range depths {
			if d != (core.Depth{}) {
				return fmt.Sprintf("queue %q: %+v", q, d)
			}
		}
	}
	return ""
}

// DiscardLogger returns a logger that drops everything.
func DiscardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestLogger returns a logger writing to t.Log until the test's cleanups run; later records
// (from goroutines that outlive the test, such as a halted node's listener) are dropped
// rather than panicking the test binary.
func TestLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.off.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t   testing.TB
	mu  sync.Mutex
	off atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.off.Load() {
		w.t.Log(string(p[:len(p)-min(1, len(p))]))
	}
	return len(p), nil
}
