package memory

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// fakeClock is a settable clock for Options.Clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newFake(t testing.TB) (*Backend, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	be := New(&Options{Clock: clk.Now})
	t.Cleanup(func() { be.Close() })
	return be, clk
}

func newReal(t testing.TB) *Backend {
	t.Helper()
	be := New(nil)
	t.Cleanup(func() { be.Close() })
	return be
}

func publish(t testing.TB, be *Backend, queue, id string, notBefore time.Time) {
	t.Helper()
	err := be.Publish(context.Background(), core.OutgoingBatch{ID: id, Queue: queue, Body: []byte("body-" + id), NotBefore: notBefore})
	if err != nil {
		t.Fatalf("publish %s: %v", id, err)
	}
}

func publishN(t testing.TB, be *Backend, queue string, n int) {
	t.Helper()
	for i := range n {
		publish(t, be, queue, fmt.Sprintf("%s-%d", queue, i), time.Time{})
	}
}

// fetch claims with Wait 0 and a 10 s lease.
func fetch(t testing.TB, be *Backend, slots ...core.QueueSlots) []*core.Claim {
	t.Helper()
	cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n1", Queues: slots, Lease: 10 * time.Second})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	return cs
}

func one(queue string) core.QueueSlots { return core.QueueSlots{Queue: queue, Free: 1} }

func all(queue string) core.QueueSlots { return core.QueueSlots{Queue: queue, Free: core.Unlimited} }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func depth(t testing.TB, be *Backend, queue string) core.Depth {
	t.Helper()
	d, err := be.Depths(context.Background(), []string{queue})
	if err != nil {
		t.Fatalf("depths: %v", err)
	}
	return d[queue].Counts() // OldestReady is checked by the Depth tests
}

// waitForWaiters blocks until n fetches are blocked on queue, or fails after 2 s.
func waitForWaiters(t testing.TB, be *Backend, queue string, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		be.mu.Lock()
		got := 0
		if q, ok := be.queues[queue]; ok {
			got = len(q.waiters)
		}
		be.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no %d fetches blocked on %q after 2s", n, queue)
}
