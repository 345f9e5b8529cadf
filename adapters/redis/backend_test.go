package redis

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestPublishFetchAck(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	publishN(t, be, "q", 3)
	publishN(t, be, "other", 2)
	cs := fetch(t, be, all("q"))
	if len(cs) != 3 {
		t.Fatalf("claimed %d, want 3", len(cs))
	}
	for _, c := range cs {
		if c.Queue != "q" || c.Deliveries != 1 || !bytes.Equal(c.Body, []byte("body-"+c.ID)) {
			t.Fatalf("claim %+v: want queue q, deliveries 1, body body-<id>", c)
		}
		if until := time.Until(c.LeaseUntil); until <= 9*time.Second || until > 10*time.Second {
			t.Fatalf("LeaseUntil in %v, want about 10s", until)
		}
	}
	if d := depth(t, be, "q"); d != (core.Depth{InFlight: 3}) {
		t.Fatalf("depth = %+v, want 3 in flight", d)
	}
	for _, c := range cs {
		must(t, be.Ack(context.Background(), c))
	}
	if d := depth(t, be, "q"); d != (core.Depth{}) {
		t.Fatalf("depth after ack = %+v, want zeros", d)
	}
	if d := depth(t, be, "other"); d != (core.Depth{Ready: 2}) {
		t.Fatalf("other queue depth = %+v, want 2 ready: a fetch took batches of a queue it did not ask for", d)
	}
	n, err := be.rdb.HLen(context.Background(), be.keys.keys("q").script[1]).Result()
	if err != nil || n != 0 {
		t.Fatalf("bodies left after ack: %d (%v)", n, err)
	}
}

func TestPublishSameIDIsNoop(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	publish(t, be, "q", "b1", time.Time{})
	c := fetch(t, be, all("q"))
	if len(c) != 1 {
		t.Fatalf("claimed %d, want 1", len(c))
	}
	publish(t, be, "q", "b1", time.Time{}) // e.g. a publish retried after a lost reply
	if d := depth(t, be, "q"); d != (core.Depth{InFlight: 1}) {
		t.Fatalf("depth after republishing an in-flight id = %+v, want it untouched", d)
	}
	must(t, be.Ack(context.Background(), c[0]))
}

func TestDueNeverEarly(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	due := time.Now().Add(400 * time.Millisecond)
	publish(t, be, "q", "late", due)
	if cs := fetch(t, be, all("q")); len(cs) != 0 {
		t.Fatalf("claimed %d before the due time", len(cs))
	}
	if d := depth(t, be, "q"); d != (core.Depth{Delayed: 1}) {
		t.Fatalf("depth = %+v, want 1 delayed", d)
	}
	cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n", Queues: []core.QueueSlots{all("q")}, Lease: time.Second, Wait: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if len(cs) != 1 {
		t.Fatalf("a waiting fetch claimed %d, want the delayed batch", len(cs))
	}
	if now.Before(due) {
		t.Fatalf("delivered %v early", due.Sub(now))
	}
	if late := now.Sub(due); late > 250*time.Millisecond {
		t.Fatalf("delivered %v late: the wait should end at the due time", late)
	}
}

func TestFreeSlots(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	publishN(t, be, "a", 10)
	publishN(t, be, "b", 10)
	if cs := fetch(t, be, core.QueueSlots{Queue: "a", Free: 3}); len(cs) != 3 {
		t.Fatalf("Free 3 claimed %d", len(cs))
	}
	cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n", Lease: 10 * time.Second, Max: 4,
		Queues: []core.QueueSlots{all("a"), all("b")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) == 0 || len(cs) > 4 {
		t.Fatalf("two Unlimited queues with Max 4 claimed %d, want 1..4", len(cs))
	}
	per := map[string]int{}
	for _, c := range cs {
		per[c.Queue]++
	}
	if per["a"] == 0 || per["b"] == 0 {
		t.Fatalf("claims per queue %v: want both queues served", per)
	}
	cs, err = be.Fetch(context.Background(), core.FetchRequest{Node: "n", Lease: 10 * time.Second, Max: 4,
		Queues: []core.QueueSlots{one("a"), all("b")}})
	if err != nil {
		t.Fatal(err)
	}
	per = map[string]int{}
	for _, c := range cs {
		per[c.Queue]++
	}
	if per["a"] != 1 || per["b"] != 3 {
		t.Fatalf("claims per queue %v: want a=1 (Free 1), b=3 (the rest of Max 4)", per)
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newTestBackend(t, "", nil)
	publish(t, be, "q", "b1", time.Time{})
	c := fetch(t, be, all("q"))[0]
	start := time.Now()
	must(t, be.Retry(ctx, c, []byte("v2"), 300*time.Millisecond))
	if d := depth(t, be, "q"); d != (core.Depth{Delayed: 1}) {
		t.Fatalf("depth after retry = %+v, want 1 delayed", d)
	}
	cs, err := be.Fetch(ctx, core.FetchRequest{Node: "n", Queues: []core.QueueSlots{all("q")}, Lease: 10 * time.Second, Wait: 3 * time.Second})
	if err != nil || len(cs) != 1 {
		t.Fatalf("fetch after retry: %d claims, %v", len(cs), err)
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("retried batch claimed after %v, before its 300ms delay", el)
	}
	if string(cs[0].Body) != "v2" || cs[0].Deliveries != 1 {
		t.Fatalf("after a rewrite: body %q deliveries %d, want v2 and 1", cs[0].Body, cs[0].Deliveries)
	}
	// In place: a nil body keeps the body and the count.
	must(t, be.Retry(ctx, cs[0], nil, 0))
	cs = fetch(t, be, all("q"))
	if len(cs) != 1 || string(cs[0].Body) != "v2" || cs[0].Deliveries != 2 {
		t.Fatalf("after a retry in place: %+v, want body v2 and deliveries 2", cs)
	}
}

func TestSettleTwiceIsNoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ops := map[string]func(be *Backend, c *core.Claim) error{
		"ack":   func(be *Backend, c *core.Claim) error { return be.Ack(ctx, c) },
		"drop":  func(be *Backend, c *core.Claim) error { return be.Drop(ctx, c, core.ReasonDeliveryExhausted) },
		"retry": func(be *Backend, c *core.Claim) error { return be.Retry(ctx, c, []byte("v2"), time.Hour) },
	}
	be := newTestBackend(t, "", nil)
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			q := "q-" + name
			publish(t, be, q, "b1", time.Time{})
			c := fetch(t, be, all(q))[0]
			must(t, op(be, c))
			for _, again := range ops {
				if err := again(be, c); err != nil {
					t.Fatalf("settling a settled claim: %v, want nil", err)
				}
			}
			if err := be.Extend(ctx, c, time.Minute); err != nil {
				t.Fatalf("extending a settled claim: %v, want nil", err)
			}
		})
	}
}

func TestExtend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newTestBackend(t, "", nil)
	publish(t, be, "q", "b1", time.Time{})
	c := fetchLease(t, be, 300*time.Millisecond, all("q"))[0]
	for range 4 {
		time.Sleep(150 * time.Millisecond)
		before := c.LeaseUntil
		must(t, be.Extend(ctx, c, 300*time.Millisecond))
		if !c.LeaseUntil.After(before) {
			t.Fatalf("LeaseUntil not moved: %v -> %v", before, c.LeaseUntil)
		}
		if cs := fetch(t, be, all("q")); len(cs) != 0 {
			t.Fatalf("an extended lease was reclaimed")
		}
	}
	must(t, be.Ack(ctx, c))
}

func TestDepths(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	publishN(t, be, "q", 3)
	publish(t, be, "q", "later", time.Now().Add(time.Hour))
	fetch(t, be, one("q"))
	d, err := be.Depths(context.Background(), []string{"q", "never"})
	if err != nil {
		t.Fatal(err)
	}
	if d["q"].Counts() != (core.Depth{Ready: 2, InFlight: 1, Delayed: 1}) || d["never"] != (core.Depth{}) {
		t.Fatalf("depths = %+v", d)
	}
}

func TestWakeLatency(t *testing.T) {
	t.Parallel()
	pub := newTestBackend(t, "", nil)
	sub := newTestBackend(t, pub.Prefix(), nil)
	ctx := context.Background()
	// Warm up the subscription: one empty wait.
	if _, err := sub.Fetch(ctx, core.FetchRequest{Node: "s", Queues: []core.QueueSlots{all("q")}, Lease: time.Second, Wait: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	var worst time.Duration
	for i := range 5 {
		got := make(chan time.Time, 1)
		go func() {
			cs, err := sub.Fetch(ctx, core.FetchRequest{Node: "s", Queues: []core.QueueSlots{all("q")}, Lease: time.Second, Wait: 5 * time.Second})
			if err != nil || len(cs) != 1 {
				t.Errorf("fetch: %d claims, %v", len(cs), err)
			}
			got <- time.Now()
		}()
		time.Sleep(50 * time.Millisecond) // let the fetch start waiting
		sent := time.Now()
		publish(t, pub, "q", "w"+string(rune('0'+i)), time.Time{})
		lat := (<-got).Sub(sent)
		worst = max(worst, lat)
	}
	// Without the wake-up the fetch would end only at its 5 s Wait; 2 s tells the two apart on a
	// loaded machine (pickup latency itself is measured by bench/, e.g. `go run ./bench`).
	t.Logf("worst wake latency over 5 publishes: %v", worst)
	if worst > 2*time.Second {
		t.Fatalf("a waiting fetch took %v to pick up a publish: the wake-up did not reach it (want well under its 5 s Wait)", worst)
	}
}

func TestFetchCancelReturnsPromptly(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	start := time.Now()
	cs, err := be.Fetch(ctx, core.FetchRequest{Node: "n", Queues: []core.QueueSlots{all("q")}, Lease: time.Second, Wait: 10 * time.Second})
	if err != nil || len(cs) != 0 {
		t.Fatalf("cancelled fetch: %d claims, %v; want none and nil", len(cs), err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("cancelled fetch returned after %v", el)
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	publish(t, be, "q", "b1", time.Time{})
	c := fetch(t, be, all("q"))[0]
	must(t, be.Close())
	must(t, be.Close())
	ctx := context.Background()
	checks := map[string]error{
		"publish": be.Publish(ctx, core.OutgoingBatch{ID: "x", Queue: "q"}),
		"ack":     be.Ack(ctx, c),
		"extend":  be.Extend(ctx, c, time.Second),
	}
	_, checks["fetch"] = be.Fetch(ctx, core.FetchRequest{Queues: []core.QueueSlots{all("q")}})
	_, checks["depths"] = be.Depths(ctx, []string{"q"})
	for name, err := range checks {
		if !errors.Is(err, core.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func TestInvalidPrefix(t *testing.T) {
	t.Parallel()
	if _, err := New(&Options{Prefix: "a{b}"}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("New with braces in Prefix: %v, want ErrInvalidConfig", err)
	}
}
