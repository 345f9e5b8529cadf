package sqljobs

import (
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestLeaseExpiryRedeliversAndStaleSettleFails(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.backend(nil), w.backend(nil)
	publish(t, a, "q", "b1", time.Time{})
	lease := time.Second // the second fetch must land inside it on a loaded -race machine
	first := fetch(t, a, lease, all("q"))
	if len(first) != 1 || first[0].Deliveries != 1 {
		t.Fatalf("first claim = %v", first)
	}
	if cs := fetch(t, b, lease, all("q")); len(cs) != 0 {
		t.Fatal("claimed under a live lease")
	}
	time.Sleep(lease + 100*time.Millisecond)
	// Expired but not yet re-claimed: the lease is lost already.
	if err := a.Extend(ctxT(t), first[0], time.Second); !errors.Is(err, core.ErrLeaseLost) {
		t.Fatalf("extend of an expired lease: %v, want ErrLeaseLost", err)
	}
	if d := depth(t, a, "q"); d != (core.Depth{Ready: 1}) {
		t.Fatalf("depth after expiry = %+v", d)
	}
	second := fetch(t, b, 10*time.Second, all("q"))
	if len(second) != 1 || second[0].Deliveries != 2 || second[0].ID != "b1" {
		t.Fatalf("re-claim = %+v, want b1 with deliveries 2", second)
	}
	for name, settle := range map[string]func() error{
		"ack":    func() error { return a.Ack(ctxT(t), first[0]) },
		"retry":  func() error { return a.Retry(ctxT(t), first[0], nil, 0) },
		"drop":   func() error { return a.Drop(ctxT(t), first[0], core.ReasonWorkerLost) },
		"extend": func() error { return a.Extend(ctxT(t), first[0], time.Second) },
	} {
		if err := settle(); !errors.Is(err, core.ErrLeaseLost) {
			t.Errorf("stale %s: %v, want ErrLeaseLost", name, err)
		}
	}
	// The current holder is unaffected.
	if err := b.Ack(ctxT(t), second[0]); err != nil {
		t.Fatalf("current holder's ack: %v", err)
	}
	if err := b.Ack(ctxT(t), second[0]); err != nil {
		t.Fatalf("double ack: %v", err)
	}
	if err := b.Extend(ctxT(t), second[0], time.Second); err != nil {
		t.Fatalf("extend after the holder settled must be a no-op: %v", err)
	}
}

func TestExtendKeepsLease(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.backend(nil), w.backend(nil)
	publish(t, a, "q", "b1", time.Time{})
	c := fetch(t, a, 300*time.Millisecond, all("q"))[0]
	before := c.LeaseUntil
	if err := a.Extend(ctxT(t), c, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if !c.LeaseUntil.After(before.Add(time.Second)) {
		t.Fatalf("LeaseUntil %v not moved from %v", c.LeaseUntil, before)
	}
	time.Sleep(500 * time.Millisecond)
	if cs := fetch(t, b, time.Second, all("q")); len(cs) != 0 {
		t.Fatal("extended lease was taken")
	}
	if err := a.Ack(ctxT(t), c); err != nil {
		t.Fatal(err)
	}
}

func TestRetryRewriteAndInPlace(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	publish(t, be, "q", "b1", time.Time{})
	c := fetch(t, be, time.Second, all("q"))[0]
	delay := 400 * time.Millisecond
	retried := time.Now()
	if err := be.Retry(ctxT(t), c, []byte("v2"), delay); err != nil {
		t.Fatal(err)
	}
	if err := be.Retry(ctxT(t), c, []byte("v3"), 0); err != nil {
		t.Fatalf("second retry of a settled claim must be a no-op: %v", err)
	}
	if d := depth(t, be, "q"); d != (core.Depth{Delayed: 1}) {
		t.Fatalf("depth after a delayed retry = %+v", d)
	}
	if cs := fetch(t, be, time.Second, all("q")); len(cs) != 0 {
		t.Fatal("retried batch claimed before its delay")
	}
	cs, err := be.Fetch(ctxT(t), core.FetchRequest{Node: "n", Queues: []core.QueueSlots{all("q")}, Lease: time.Second, Wait: 3 * time.Second})
	if err != nil || len(cs) != 1 {
		t.Fatalf("after the delay: %d, %v", len(cs), err)
	}
	if since := time.Since(retried); since < delay {
		t.Fatalf("retried batch claimed after %v, before its %v delay", since, delay)
	}
	c = cs[0]
	if string(c.Body) != "v2" || c.Deliveries != 1 {
		t.Fatalf("rewrite: body %q deliveries %d, want v2 and 1", c.Body, c.Deliveries)
	}
	// A nil body is a retry in place: body and Deliveries go on.
	if err := be.Retry(ctxT(t), c, nil, 0); err != nil {
		t.Fatal(err)
	}
	c = fetch(t, be, time.Second, all("q"))[0]
	if string(c.Body) != "v2" || c.Deliveries != 2 {
		t.Fatalf("in place: body %q deliveries %d, want v2 and 2", c.Body, c.Deliveries)
	}
}

func TestForeignClaimRejected(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	err := be.Ack(ctxT(t), &core.Claim{Queue: "q", ID: "x", Handle: "not ours"})
	if !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("foreign claim: %v", err)
	}
	if err := be.Ack(ctxT(t), nil); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("nil claim: %v", err)
	}
}
