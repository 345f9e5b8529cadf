package memory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// calls exercises every Backend method once; the claim comes from a fetch made while usable.
func calls(c *core.Claim) map[string]func(be *Backend) error {
	ctx := context.Background()
	return map[string]func(be *Backend) error{
		"publish": func(be *Backend) error {
			return be.Publish(ctx, core.OutgoingBatch{ID: "p", Queue: "q", Body: []byte("x")})
		},
		"fetch": func(be *Backend) error {
			_, err := be.Fetch(ctx, core.FetchRequest{Node: "n", Queues: []core.QueueSlots{one("q")}, Lease: time.Minute})
			return err
		},
		"ack":    func(be *Backend) error { return be.Ack(ctx, c) },
		"retry":  func(be *Backend) error { return be.Retry(ctx, c, []byte("v2"), 0) },
		"drop":   func(be *Backend) error { return be.Drop(ctx, c, core.ReasonDeliveryExhausted) },
		"extend": func(be *Backend) error { return be.Extend(ctx, c, time.Minute) },
		"depths": func(be *Backend) error {
			_, err := be.Depths(ctx, []string{"q"})
			return err
		},
	}
}

func TestBreakRestore(t *testing.T) {
	t.Parallel()
	for name := range calls(nil) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			be := newReal(t)
			publish(t, be, "q", "b1", time.Time{})
			c := fetch(t, be, one("q"))[0]
			call := calls(c)[name]
			be.Break()
			if err := call(be); !errors.Is(err, core.ErrBackendUnavailable) {
				t.Fatalf("%s while broken: %v, want ErrBackendUnavailable", name, err)
			}
			be.Restore()
			if err := call(be); err != nil {
				t.Fatalf("%s after Restore: %v", name, err)
			}
		})
	}
}

func TestBreakKeepsBatches(t *testing.T) {
	t.Parallel()
	be := newReal(t)
	publishN(t, be, "q", 3)
	be.Break()
	be.Restore()
	if n := len(fetch(t, be, all("q"))); n != 3 {
		t.Fatalf("claimed %d after an outage, want 3", n)
	}
}

func TestBreakWakesWaitingFetch(t *testing.T) {
	t.Parallel()
	be := newReal(t)
	done := make(chan error, 1)
	go func() {
		_, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n", Queues: []core.QueueSlots{one("q")}, Lease: time.Minute, Wait: time.Minute})
		done <- err
	}()
	waitForWaiters(t, be, "q", 1)
	be.Break()
	select {
	case err := <-done:
		if !errors.Is(err, core.ErrBackendUnavailable) {
			t.Fatalf("waiting fetch got %v, want ErrBackendUnavailable", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Break did not wake the waiting fetch")
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	be := New(nil)
	publish(t, be, "q", "b1", time.Time{})
	c := fetch(t, be, one("q"))[0]
	done := make(chan error, 1)
	go func() {
		_, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n", Queues: []core.QueueSlots{one("w")}, Lease: time.Minute, Wait: time.Minute})
		done <- err
	}()
	waitForWaiters(t, be, "w", 1)
	must(t, be.Close())
	select {
	case err := <-done:
		if !errors.Is(err, core.ErrClosed) {
			t.Fatalf("waiting fetch got %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not wake the waiting fetch")
	}
	for name, call := range calls(c) {
		if err := call(be); !errors.Is(err, core.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	must(t, be.Close()) // twice is fine
}

func TestDepths(t *testing.T) {
	t.Parallel()
	be, clk := newFake(t)
	publishN(t, be, "q", 10)
	for i := range 4 {
		publish(t, be, "q", "later-"+string(rune('a'+i)), clk.Now().Add(5*time.Second))
	}
	publishN(t, be, "other", 2)
	claims := fetch(t, be, core.QueueSlots{Queue: "q", Free: 3})
	must(t, be.Retry(context.Background(), claims[0], []byte("v2"), time.Hour))

	got, err := be.Depths(context.Background(), []string{"q", "other", "never-seen"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]core.Depth{
		"q":          {Ready: 7, InFlight: 2, Delayed: 5},
		"other":      {Ready: 2},
		"never-seen": {},
	}
	for q, w := range want {
		if got[q].Counts() != w {
			t.Errorf("depth %s = %+v, want %+v", q, got[q], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("depths has %d queues, want %d", len(got), len(want))
	}
	clk.Advance(5 * time.Second) // the 4 delayed publishes come due, the retry does not
	if d := depth(t, be, "q"); d != (core.Depth{Ready: 11, InFlight: 2, Delayed: 1}) {
		t.Errorf("depth after 5s = %+v", d)
	}
	if d := depth(t, be, "q"); d.Ready+d.InFlight+d.Delayed != 14 {
		t.Errorf("depths do not add up to the 14 stored batches: %+v", d)
	}
}

// TestPublishCopiesBody: Publish stores its own copy of the body (the caller's buffer is the
// caller's again once Publish returns, see core.OutgoingBatch), and every claim of the batch
// shares that copy (claims are read-only, see core.Claim), so a large batch is held once.
func TestPublishCopiesBody(t *testing.T) {
	t.Parallel()
	be := newReal(t)
	body := []byte("hello")
	must(t, be.Publish(context.Background(), core.OutgoingBatch{ID: "b1", Queue: "q", Body: body}))
	copy(body, "XXXXX")
	c := fetch(t, be, one("q"))[0]
	if string(c.Body) != "hello" {
		t.Fatalf("claim body %q; want the bytes as published", c.Body)
	}
	must(t, be.Retry(context.Background(), c, nil, 0))
	c2 := fetch(t, be, one("q"))[0]
	if string(c2.Body) != "hello" || &c2.Body[0] != &c.Body[0] {
		t.Fatalf("stored body %q after a retry in place, shared with the first claim: %v; want the same bytes", c2.Body, &c2.Body[0] == &c.Body[0])
	}
}

func TestPublishRejects(t *testing.T) {
	t.Parallel()
	be := newReal(t)
	if err := be.Publish(context.Background(), core.OutgoingBatch{ID: "b1"}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("publish with no queue: %v, want ErrInvalidConfig", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := be.Publish(ctx, core.OutgoingBatch{ID: "b1", Queue: "q"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("publish with a cancelled context: %v, want context.Canceled", err)
	}
	if d := depth(t, be, "q"); d != (core.Depth{}) {
		t.Fatalf("a refused publish stored something: %+v", d)
	}
}
