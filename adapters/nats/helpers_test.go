package nats

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// openBackend returns a Backend on url with a unique prefix (shared by every client made with
// the same prefix through newClient), closed in t.Cleanup.
func openBackend(t testing.TB, url string, opts *Options) *Backend {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = testenv.UniqueName("t")
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	be, err := New(url, &o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// sibling returns another client of be's namespace (a separate connection, as another node).
func sibling(t testing.TB, be *Backend) *Backend {
	t.Helper()
	o := be.opts
	return openBackend(t, be.nc.ConnectedUrl(), &o)
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

// fetchWait claims with the given wait and lease.
func fetchWait(t testing.TB, be *Backend, wait, lease time.Duration, slots ...core.QueueSlots) []*core.Claim {
	t.Helper()
	cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n1", Queues: slots, Lease: lease, Wait: wait})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	return cs
}

// fetchN fetches until n claims arrived (or 5 s passed).
func fetchN(t testing.TB, be *Backend, n int, lease time.Duration, slots ...core.QueueSlots) []*core.Claim {
	t.Helper()
	var out []*core.Claim
	deadline := time.Now().Add(5 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		out = append(out, fetchWait(t, be, 200*time.Millisecond, lease, slots...)...)
	}
	if len(out) < n {
		t.Fatalf("got %d claims, want %d", len(out), n)
	}
	return out
}

func one(queue string) core.QueueSlots { return core.QueueSlots{Queue: queue, Free: 1} }

func all(queue string) core.QueueSlots { return core.QueueSlots{Queue: queue, Free: core.Unlimited} }

func depth(t testing.TB, be *Backend, queue string) core.Depth {
	t.Helper()
	d, err := be.Depths(context.Background(), []string{queue})
	if err != nil {
		t.Fatalf("depths: %v", err)
	}
	return d[queue]
}

// eventually polls cond every 20 ms for up to 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not true within 10s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
