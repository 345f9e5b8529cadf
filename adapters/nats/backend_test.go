package nats

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
)

func TestDelayedNeverEarly(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natstest.NATSURL(t), nil)
	due := time.Now().Add(800 * time.Millisecond)
	publish(t, be, "q", "late", due)
	publish(t, be, "q", "now", time.Time{})
	if d := depth(t, be, "q"); d != (core.Depth{Ready: 1, Delayed: 1}) {
		t.Fatalf("depth = %+v, want 1 ready, 1 delayed", d)
	}
	got := fetchN(t, be, 1, 10*time.Second, all("q"))
	if got[0].ID != "now" {
		t.Fatalf("first claim %s, want the due batch", got[0].ID)
	}
	var late *core.Claim
	for late == nil {
		cs := fetchWait(t, be, 100*time.Millisecond, 10*time.Second, all("q"))
		for _, c := range cs {
			if now := time.Now(); now.Before(due) {
				t.Fatalf("delayed batch claimed %v early", due.Sub(now))
			}
			late = c
		}
		if time.Since(due) > 3*time.Second {
			t.Fatalf("delayed batch not claimed 3s after its due time")
		}
	}
	if late.ID != "late" || late.Deliveries != 1 || string(late.Body) != "body-late" {
		t.Fatalf("late claim = %s deliveries %d body %q", late.ID, late.Deliveries, late.Body)
	}
}

func TestFetchWithinFreeSlots(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natstest.NATSURL(t), nil)
	publishN(t, be, "a", 6)
	publishN(t, be, "b", 6)
	cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n", Lease: 10 * time.Second, Wait: 500 * time.Millisecond,
		Queues: []core.QueueSlots{{Queue: "a", Free: 2}}})
	if err != nil || len(cs) == 0 || len(cs) > 2 {
		t.Fatalf("Free 2: %d claims, err %v", len(cs), err)
	}
	for _, c := range cs {
		if c.Queue != "a" {
			t.Fatalf("claim of %q for a request of a", c.Queue)
		}
	}
	total := len(cs)
	for range 20 {
		cs, err = be.Fetch(context.Background(), core.FetchRequest{Node: "n", Lease: 10 * time.Second, Wait: 100 * time.Millisecond, Max: 3,
			Queues: []core.QueueSlots{{Queue: "b", Free: core.Unlimited}}})
		if err != nil || len(cs) > 3 {
			t.Fatalf("Unlimited with Max 3: %d claims, err %v", len(cs), err)
		}
		total += len(cs)
	}
	if d := depth(t, be, "a"); d.Ready+d.InFlight != 6 {
		t.Fatalf("queue a depth %+v", d)
	}
	if d := depth(t, be, "b"); d.InFlight != 6 {
		t.Fatalf("queue b depth %+v, want 6 in flight", d)
	}
}

func TestExclusiveAcrossThreeClients(t *testing.T) {
	t.Parallel()
	a := openBackend(t, natstest.NATSURL(t), nil)
	clients := []*Backend{a, sibling(t, a), sibling(t, a)}
	const n = 8
	for i := range n {
		if err := a.Publish(context.Background(), core.OutgoingBatch{ID: string(rune('a' + i)), Queue: "ex", Body: []byte("x"), Exclusive: true}); err != nil {
			t.Fatal(err)
		}
	}
	var running, peak, done atomic.Int64
	var wg sync.WaitGroup
	for _, be := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(20 * time.Second)
			for done.Load() < n && time.Now().Before(deadline) {
				cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n", Lease: 5 * time.Second, Wait: 100 * time.Millisecond,
					Queues: []core.QueueSlots{{Queue: "ex", Free: 1, Exclusive: true}}})
				if err != nil {
					t.Errorf("fetch: %v", err)
					return
				}
				for _, c := range cs {
					r := running.Add(1)
					for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
					}
					time.Sleep(30 * time.Millisecond)
					running.Add(-1)
					if err := be.Ack(context.Background(), c); err != nil {
						t.Errorf("ack: %v", err)
					}
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if done.Load() != n || peak.Load() != 1 {
		t.Fatalf("done %d of %d, peak concurrency %d (want 1)", done.Load(), n, peak.Load())
	}
}

func TestLeaseExpiryAndLostLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := openBackend(t, natstest.NATSURL(t), nil)
	other := sibling(t, be)
	publish(t, be, "q", "b1", time.Time{})
	lease := 500 * time.Millisecond
	stale := fetchN(t, be, 1, lease, one("q"))[0]
	if stale.Deliveries != 1 || !stale.LeaseUntil.After(time.Now()) || stale.LeaseUntil.After(time.Now().Add(lease)) {
		t.Fatalf("first claim: deliveries %d, lease until %v", stale.Deliveries, stale.LeaseUntil)
	}
	current := fetchN(t, other, 1, lease, one("q"))[0]
	if current.Deliveries != 2 || !bytes.Equal(current.Body, stale.Body) {
		t.Fatalf("redelivery: deliveries %d body %q", current.Deliveries, current.Body)
	}
	ops := map[string]func() error{
		"ack":    func() error { return be.Ack(ctx, stale) },
		"drop":   func() error { return be.Drop(ctx, stale, core.ReasonDeliveryExhausted) },
		"retry":  func() error { return be.Retry(ctx, stale, []byte("v2"), 0) },
		"extend": func() error { return be.Extend(ctx, stale, time.Minute) },
	}
	for name, op := range ops {
		if err := op(); !errors.Is(err, core.ErrLeaseLost) {
			t.Fatalf("%s of a lost claim: %v, want ErrLeaseLost", name, err)
		}
	}
	if err := other.Extend(ctx, current, time.Minute); err != nil {
		t.Fatalf("extend of the current claim: %v", err)
	}
	if !current.LeaseUntil.After(time.Now().Add(lease / 2)) {
		t.Fatalf("extended lease until %v", current.LeaseUntil)
	}
	if err := other.Ack(ctx, current); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if err := other.Ack(ctx, current); err != nil {
		t.Fatalf("second ack: %v, want nil", err)
	}
	if err := other.Drop(ctx, current, "x"); err != nil {
		t.Fatalf("drop after ack: %v, want nil", err)
	}
	eventually(t, "queue empty", func() bool { return depth(t, be, "q") == core.Depth{} })
	if cs := fetchWait(t, be, 2*lease, lease, one("q")); len(cs) != 0 {
		t.Fatalf("an acked batch came back")
	}
}

func TestLongClaimExtendedKeepsLease(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natstest.NATSURL(t), nil)
	other := sibling(t, be)
	publish(t, be, "q", "b1", time.Time{})
	lease := 400 * time.Millisecond
	c := fetchN(t, be, 1, lease, one("q"))[0]
	for range 6 { // three leases long
		time.Sleep(lease / 4)
		if err := be.Extend(context.Background(), c, lease); err != nil {
			t.Fatalf("extend: %v", err)
		}
	}
	if cs := fetchWait(t, other, lease/2, lease, one("q")); len(cs) != 0 {
		t.Fatalf("an extended claim was handed out again")
	}
	if err := be.Ack(context.Background(), c); err != nil {
		t.Fatalf("ack: %v", err)
	}
}

func TestRetryRewritesAfterDelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := openBackend(t, natstest.NATSURL(t), nil)
	publish(t, be, "q", "b1", time.Time{})
	c := fetchN(t, be, 1, 10*time.Second, one("q"))[0]
	start := time.Now()
	if err := be.Retry(ctx, c, []byte("v2"), 600*time.Millisecond); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if d := depth(t, be, "q"); d != (core.Depth{Delayed: 1}) {
		t.Fatalf("depth after a delayed retry = %+v", d)
	}
	c2 := fetchN(t, be, 1, 10*time.Second, one("q"))[0]
	if since := time.Since(start); since < 600*time.Millisecond {
		t.Fatalf("retried batch back after %v, before its delay", since)
	}
	if c2.ID != "b1" || string(c2.Body) != "v2" || c2.Deliveries != 1 {
		t.Fatalf("retried claim: id %s body %q deliveries %d; want the rewritten body, deliveries 1", c2.ID, c2.Body, c2.Deliveries)
	}
	if err := be.Retry(ctx, c, []byte("v3"), 0); err != nil {
		t.Fatalf("retry of a settled claim: %v, want nil", err)
	}
	if err := be.Ack(ctx, c2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "queue empty", func() bool { return depth(t, be, "q") == core.Depth{} })
}

func TestFetchWakesOnPublish(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natstest.NATSURL(t), nil)
	pub := sibling(t, be)
	fetchWait(t, be, 0, time.Second, all("a"), all("b")) // create the consumers
	published := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		published <- pub.Publish(context.Background(), core.OutgoingBatch{ID: "x", Queue: "b", Body: []byte("x")})
	}()
	start := time.Now()
	cs := fetchWait(t, be, 3*time.Second, 10*time.Second, all("a"), all("b"))
	took := time.Since(start)
	// The fetch may see the message before the publisher has its acknowledgement: wait for it
	// before the test's cleanup closes the publisher's connection.
	if err := <-published; err != nil {
		t.Fatalf("publish: %v", err)
	}
	if len(cs) != 1 || cs[0].Queue != "b" {
		t.Fatalf("got %d claims", len(cs))
	}
	if took > time.Second {
		t.Fatalf("a waiting fetch took %v to see a publish 200ms in", took)
	}
}

func TestCancelledFetchKeepsClaims(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natstest.NATSURL(t), nil)
	fetchWait(t, be, 0, time.Second, all("q"))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	cs, err := be.Fetch(ctx, core.FetchRequest{Node: "n", Lease: 10 * time.Second, Wait: 2 * time.Second, Queues: []core.QueueSlots{all("q")}})
	if err != nil || len(cs) != 0 {
		t.Fatalf("cancelled fetch: %d claims, %v", len(cs), err)
	}
	publish(t, be, "q", "x", time.Time{}) // the cancelled fetch's pull is still outstanding
	got := fetchN(t, be, 1, 10*time.Second, all("q"))
	if got[0].Deliveries != 1 {
		t.Fatalf("deliveries %d: a claim was stranded and redelivered", got[0].Deliveries)
	}
}

func TestLargeBatchChunked(t *testing.T) {
	t.Parallel()
	srv := natstest.StartNATS(t, func(o *server.Options) { o.MaxPayload = 64 << 10 })
	be := openBackend(t, srv.URL(), nil)
	body := make([]byte, 300<<10)
	for i := range body {
		body[i] = byte(i * 7)
	}
	if err := be.Publish(context.Background(), core.OutgoingBatch{ID: "big", Queue: "q", Body: body}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if err := be.Publish(context.Background(), core.OutgoingBatch{ID: "bigd", Queue: "q", Body: body, NotBefore: time.Now().Add(300 * time.Millisecond)}); err != nil {
		t.Fatalf("delayed publish: %v", err)
	}
	cs := fetchN(t, be, 2, 10*time.Second, all("q"))
	for _, c := range cs {
		if !bytes.Equal(c.Body, body) {
			t.Fatalf("batch %s: body of %d bytes differs from the %d published", c.ID, len(c.Body), len(body))
		}
	}
	if err := be.Retry(context.Background(), cs[0], body, 0); err != nil {
		t.Fatalf("retry: %v", err)
	}
	again := fetchN(t, be, 1, 10*time.Second, all("q"))[0]
	if !bytes.Equal(again.Body, body) {
		t.Fatalf("retried large batch corrupted")
	}
	for _, c := range []*core.Claim{cs[1], again} {
		if err := be.Ack(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	// The chunks are purged before Ack returns, but the server removes an acked message from
	// the work-queue stream after Ack returns (Ack waits until the server has read the +ACK,
	// not applied it): wait, bounded, for the stream to empty.
	q := be.queues["q"]
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := q.stream.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages still in the stream 5s after every batch was acked (orphan chunks)", info.State.Msgs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOutageAndRecovery(t *testing.T) {
	t.Parallel()
	srv := natstest.StartNATS(t)
	be := openBackend(t, srv.URL(), &Options{Timeout: 500 * time.Millisecond})
	publish(t, be, "q", "before", time.Time{})
	srv.Shutdown()
	err := be.Publish(context.Background(), core.OutgoingBatch{ID: "during", Queue: "q", Body: []byte("x")})
	if !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("publish during the outage: %v, want ErrBackendUnavailable", err)
	}
	_, err = be.Fetch(context.Background(), core.FetchRequest{Node: "n", Lease: time.Second, Queues: []core.QueueSlots{one("q")}})
	if !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("fetch during the outage: %v, want ErrBackendUnavailable", err)
	}
	srv.Restart()
	eventually(t, "publish works after the restart", func() bool {
		return be.Publish(context.Background(), core.OutgoingBatch{ID: "after", Queue: "q", Body: []byte("x")}) == nil
	})
	got := map[string]bool{}
	for _, c := range fetchN(t, be, 2, 10*time.Second, all("q")) {
		got[c.ID] = true
	}
	if !got["before"] || !got["after"] {
		t.Fatalf("after the restart got %v, want before and after (the stream survives)", got)
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natstest.NATSURL(t), nil)
	publish(t, be, "q", "x", time.Time{})
	be.Close()
	if err := be.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := be.Publish(context.Background(), core.OutgoingBatch{ID: "y", Queue: "q"}); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("publish after close: %v", err)
	}
	if _, err := be.Fetch(context.Background(), core.FetchRequest{Queues: []core.QueueSlots{one("q")}}); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("fetch after close: %v", err)
	}
}
