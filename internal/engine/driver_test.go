package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq/internal/engine"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// TestCapFuncMayCallTheNode: a cap func is user code evaluated at every check; one that reads
// the node (its Stats) must not deadlock the driver.
func TestCapFuncMayCallTheNode(t *testing.T) {
	t.Parallel()
	fetched := make(chan core.FetchRequest, 1)
	fb := &fakeBackend{}
	fb.FetchFn = func(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
		select {
		case fetched <- req:
		default:
		}
		<-ctx.Done()
		return nil, nil
	}
	n := newTestNodeOn(t, fb, nil)
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try,
		MaxConcurrentBatches: txmq.CapFunc(func() (int, error) { return 3 - int(n.Stats().InFlight), nil })})
	if err := q.Listen(n, func(context.Context, []int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-fetched:
		if len(req.Queues) != 1 || req.Queues[0].Free != 3 {
			t.Fatalf("request %+v, want q with 3 free", req)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no Fetch within 3s: the cap func deadlocked the driver")
	}
}

// TestEmptyFetchDoesNotSpin: an adapter whose Fetch returns nothing at once, ignoring Wait,
// must not make the driver spin.
func TestEmptyFetchDoesNotSpin(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	fb := &fakeBackend{}
	fb.FetchFn = func(context.Context, core.FetchRequest) ([]*core.Claim, error) {
		calls.Add(1)
		return nil, nil
	}
	n := newTestNodeOn(t, fb, &txmq.NodeOptions{PollWait: time.Second})
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	if err := q.Listen(n, func(context.Context, []int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if c := calls.Load(); c > 30 {
		t.Fatalf("%d Fetch calls in 300ms against a backend that returns at once: the driver spins", c)
	}
}

// TestFreeSlotJustBeforeFetch: a slot that frees (or a listener that is added) after the
// driver computed its request but before its Fetch started must still cut the wait short.
func TestFreeSlotJustBeforeFetch(t *testing.T) {
	t.Parallel()
	for _, tc := range []string{"slot freed", "listener added"} {
		t.Run(tc, func(t *testing.T) {
			t.Parallel()
			fb := &fakeBackend{}
			n := newTestNodeOn(t, fb, &txmq.NodeOptions{PollWait: 10 * time.Second})
			q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxConcurrentBatches: txmq.Cap(1)})
			other := txmq.MustDeclareIn(n.Registry(), "other", txmq.QueueConfig[int]{Transactional: txmq.Try})
			if err := q.Listen(n, func(context.Context, []int) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if tc == "slot freed" {
				if err := other.Listen(n, func(context.Context, []int) error { return nil }); err != nil {
					t.Fatal(err)
				}
			}
			engine.Of(n).SetInflight("q", 1) // q is full
			req := engine.Of(n).FetchRequest(time.Now())
			for _, qs := range req.Queues {
				if qs.Queue == "q" {
					t.Fatalf("full queue in the request: %+v", req)
				}
			}
			if tc == "slot freed" {
				engine.Of(n).Release("q")
			} else if err := other.Listen(n, func(context.Context, []int) error { return nil }); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, _ = engine.Of(n).Fetch(req, time.Now())
			if took := time.Since(start); took > time.Second {
				t.Fatalf("the fetch waited %v although its request was already stale", took)
			}
		})
	}
}

// logRecorder is a slog handler that keeps messages.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

func (h *logRecorder) count(sub string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := 0
	for _, m := range h.msgs {
		if strings.Contains(m, sub) {
			c++
		}
	}
	return c
}

// TestInterruptedFetchIsNotAFailure: an adapter that reports its interruption with its own
// error (not wrapping context.Canceled) must not be counted as a failed fetch and backed off.
func TestInterruptedFetchIsNotAFailure(t *testing.T) {
	t.Parallel()
	fetches := make(chan core.FetchRequest, 16)
	fb := &fakeBackend{}
	fb.FetchFn = func(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
		fetches <- req
		<-ctx.Done()
		return nil, fmt.Errorf("%w: client: connection closed", core.ErrBackendUnavailable)
	}
	logs := &logRecorder{}
	n, err := txmq.NewNode(fb, &txmq.NodeOptions{Registry: txmq.NewRegistry(), Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	a := txmq.MustDeclareIn(n.Registry(), "a", txmq.QueueConfig[int]{Transactional: txmq.Try})
	b := txmq.MustDeclareIn(n.Registry(), "b", txmq.QueueConfig[int]{Transactional: txmq.Try})
	_ = a.Listen(n, func(context.Context, []int) error { return nil })
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-fetches
	_ = b.Listen(n, func(context.Context, []int) error { return nil })
	select {
	case req := <-fetches:
		if len(req.Queues) != 2 {
			t.Fatalf("refetch %+v, want both queues", req)
		}
	case <-time.After(time.Second):
		t.Fatal("no refetch after a new listener")
	}
	if c := logs.count("fetch failed"); c != 0 {
		t.Fatalf("an interruption was logged as a failed fetch %d times", c)
	}
}
