package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
)

// batch encodes a batch of string messages for driving a backend directly.
func batch(queue string, exclusive bool, keys ...string) core.OutgoingBatch {
	msgs := make([]json.RawMessage, len(keys))
	for i, k := range keys {
		msgs[i], _ = json.Marshal(k)
	}
	b := parity.EncodeBatch(queue, nil, msgs...)
	b.Exclusive = exclusive
	return b
}

// fetchAll fetches until n claims of req arrived or timeout passed.
func fetchAll(t testing.TB, be *Backend, req core.FetchRequest, n int, timeout time.Duration) []*core.Claim {
	t.Helper()
	var got []*core.Claim
	deadline := time.Now().Add(timeout)
	for len(got) < n && time.Now().Before(deadline) {
		cs, err := be.Fetch(context.Background(), req)
		if err != nil {
			t.Fatalf("Fetch: %v", err)
		}
		got = append(got, cs...)
	}
	return got
}

func req(queue string, free int, lease time.Duration) core.FetchRequest {
	return core.FetchRequest{Node: "n-" + core.NewID(), Lease: lease, Wait: time.Second, Queues: []core.QueueSlots{{Queue: queue, Free: free}}}
}

func mustPublish(t testing.TB, be *Backend, b core.OutgoingBatch) {
	t.Helper()
	if err := be.Publish(context.Background(), b); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

// TestDelaysNeverEarly: delays under the native cap, beyond it, and far beyond it (through
// the holding queue) arrive no earlier than due and within a few seconds after.
func TestDelaysNeverEarly(t *testing.T) {
	t.Parallel()
	for _, exclusive := range []bool{false, true} {
		t.Run(map[bool]string{false: "standard", true: "exclusive"}[exclusive], func(t *testing.T) {
			t.Parallel()
			be := newSpace(t).client(t, nil)
			delays := []time.Duration{0, 700 * time.Millisecond, 1500 * time.Millisecond, testCap + 1500*time.Millisecond, 2*testCap + 500*time.Millisecond}
			due := map[string]time.Time{}
			for _, d := range delays {
				b := batch("delays", exclusive, d.String())
				b.NotBefore = time.Now().Add(d)
				due[b.ID] = b.NotBefore
				mustPublish(t, be, b)
			}
			r := core.FetchRequest{Node: "n", Lease: 5 * time.Second, Wait: time.Second, Queues: []core.QueueSlots{{Queue: "delays", Free: core.Unlimited, Exclusive: exclusive}}}
			if exclusive {
				r.Queues[0].Free = 1
			}
			seen := 0
			deadline := time.Now().Add(20 * time.Second)
			for seen < len(delays) && time.Now().Before(deadline) {
				cs, err := be.Fetch(context.Background(), r)
				if err != nil {
					t.Fatalf("Fetch: %v", err)
				}
				for _, c := range cs {
					now := time.Now()
					if now.Before(due[c.ID]) {
						t.Errorf("batch due %v arrived %v early", due[c.ID], due[c.ID].Sub(now))
					}
					if late := now.Sub(due[c.ID]); late > 3*time.Second {
						t.Errorf("batch arrived %v late", late)
					}
					if c.Deliveries != 1 {
						t.Errorf("a delayed batch arrived with Deliveries %d; parking receives must not count", c.Deliveries)
					}
					seen++
					if err := be.Ack(context.Background(), c); err != nil {
						t.Fatalf("Ack: %v", err)
					}
				}
			}
			if seen != len(delays) {
				t.Fatalf("%d of %d delayed batches arrived", seen, len(delays))
			}
		})
	}
}

// TestFreeSlots: Fetch never hands out more than the free slots, nor more than one of an
// Exclusive queue.
func TestFreeSlots(t *testing.T) {
	t.Parallel()
	be := newSpace(t).client(t, nil)
	for i := range 12 {
		mustPublish(t, be, batch("capped", false, "c"))
		if i < 4 {
			mustPublish(t, be, batch("solo", true, "x"))
		}
	}
	r := core.FetchRequest{Node: "n", Lease: 10 * time.Second, Wait: time.Second, Queues: []core.QueueSlots{{Queue: "capped", Free: 3}, {Queue: "solo", Free: 1, Exclusive: true}}}
	var capped, solo int
	for range 4 {
		cs, err := be.Fetch(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, c := range cs {
			n[c.Queue]++
		}
		if n["capped"] > 3 || n["solo"] > 1 {
			t.Fatalf("one fetch handed out %v; free slots were capped=3 solo=1", n)
		}
		capped += n["capped"]
		solo += n["solo"]
	}
	if solo != 1 {
		t.Fatalf("the Exclusive queue handed out %d batches while the first was never settled; want 1", solo)
	}
	if capped == 0 {
		t.Fatal("nothing fetched from the capped queue")
	}
}

// TestStaleHandleRefusedByServer: with the client-side check out of the way (LeaseUntil
// pushed forward), SQS itself refuses the old receipt handle for an extension.
func TestStaleHandleRefusedByServer(t *testing.T) {
	t.Parallel()
	s := newSpace(t)
	a, b := s.client(t, nil), s.client(t, nil)
	mustPublish(t, a, batch("stale", false, "s"))
	c1 := fetchAll(t, a, req("stale", 1, time.Second), 1, 10*time.Second)
	c2 := fetchAll(t, b, req("stale", 1, 10*time.Second), 1, 10*time.Second)
	if len(c1) != 1 || len(c2) != 1 {
		t.Fatal("no claims")
	}
	c1[0].LeaseUntil = time.Now().Add(time.Hour)
	err := a.Extend(context.Background(), c1[0], 5*time.Second)
	t.Logf("Extend with a stale receipt handle: %v", err)
	if !errors.Is(err, core.ErrLeaseLost) {
		t.Fatalf("Extend with a stale handle: %v; want ErrLeaseLost", err)
	}
}

// TestRetry: an in-place retry keeps the body and counts on; a rewrite (delay 0, or any
// retry on an Exclusive queue) stores the new body and restarts Deliveries; neither is early.
func TestRetry(t *testing.T) {
	t.Parallel()
	for _, exclusive := range []bool{false, true} {
		t.Run(map[bool]string{false: "standard", true: "exclusive"}[exclusive], func(t *testing.T) {
			t.Parallel()
			be := newSpace(t).client(t, nil)
			b := batch("retry", exclusive, "r")
			mustPublish(t, be, b)
			r := req("retry", 1, 5*time.Second)
			r.Queues[0].Exclusive = exclusive
			c := fetchAll(t, be, r, 1, 10*time.Second)[0]
			newBody := batch("retry", exclusive, "r2").Body
			start := time.Now()
			if err := be.Retry(context.Background(), c, newBody, 1500*time.Millisecond); err != nil {
				t.Fatalf("Retry: %v", err)
			}
			c2 := fetchAll(t, be, r, 1, 10*time.Second)[0]
			if wait := time.Since(start); wait < 1500*time.Millisecond {
				t.Fatalf("retried batch came back after %v; delay was 1.5s", wait)
			}
			if exclusive {
				if c2.Deliveries != 1 || string(c2.Body) != string(newBody) {
					t.Fatalf("exclusive retry (a rewrite): Deliveries %d, body changed %v; want 1 and the new body", c2.Deliveries, string(c2.Body) == string(newBody))
				}
			} else if c2.Deliveries != 2 || string(c2.Body) != string(b.Body) {
				t.Fatalf("in-place retry: Deliveries %d, old body kept %v; want 2 and the old body", c2.Deliveries, string(c2.Body) == string(b.Body))
			}
			if err := be.Retry(context.Background(), c2, newBody, 0); err != nil {
				t.Fatalf("Retry(0): %v", err)
			}
			c3 := fetchAll(t, be, r, 1, 10*time.Second)[0]
			if c3.Deliveries != 1 || string(c3.Body) != string(newBody) {
				t.Fatalf("rewrite: Deliveries %d, new body %v", c3.Deliveries, string(c3.Body) == string(newBody))
			}
			if err := be.Ack(context.Background(), c3); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBigBatches: bodies beyond MaxMessageBytes arrive intact: compressible ones gzipped in
// the message, incompressible ones through the overflow store, which is emptied on Ack.
func TestBigBatches(t *testing.T) {
	t.Parallel()
	s := newSpace(t)
	ov := &MemoryOverflow{}
	be := s.client(t, &Options{Overflow: ov, MaxMessageBytes: 64 << 10})
	compressible := batch("big", false, strings.Repeat("abc", 100<<10))
	random := batch("big", false, randomString(300<<10))
	weird := batch("big", false, "emoji 🎉 and \u0001 control")
	weird.Body = append(weird.Body, 0xff) // not UTF-8 at all
	want := map[string][]byte{}
	for _, b := range []core.OutgoingBatch{compressible, random, weird} {
		want[b.ID] = b.Body
		mustPublish(t, be, b)
	}
	if ov.Len() != 1 {
		t.Fatalf("overflow holds %d bodies; want 1 (the incompressible one)", ov.Len())
	}
	cs := fetchAll(t, be, req("big", core.Unlimited, 10*time.Second), 3, 10*time.Second)
	for _, c := range cs {
		if string(c.Body) != string(want[c.ID]) {
			t.Fatalf("batch %s arrived changed (%d bytes, want %d)", c.ID, len(c.Body), len(want[c.ID]))
		}
		if err := be.Ack(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	if len(cs) != 3 {
		t.Fatalf("%d of 3 big batches arrived", len(cs))
	}
	if ov.Len() != 0 {
		t.Fatalf("overflow still holds %d bodies after Ack", ov.Len())
	}
	// Without an overflow store, an oversized batch of many messages is split by messages.
	noStore := s.client(t, &Options{MaxMessageBytes: 64 << 10, Overflow: nil})
	noStore.opts.Overflow = nil
	var ids []string
	var msgs []json.RawMessage
	for i := range 8 {
		ids = append(ids, fmt.Sprint("m", i))
		msgs = append(msgs, json.RawMessage(strconv.Quote(randomString(30<<10))))
	}
	mustPublish(t, noStore, parity.EncodeBatch("split", ids, msgs...))
	got := map[string]string{}
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < 8 && time.Now().Before(deadline) {
		parts, err := noStore.Fetch(context.Background(), req("split", core.Unlimited, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range parts {
			partIDs, partMsgs, err := parity.DecodeBatch(c.Body)
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range partIDs {
				got[id] = string(partMsgs[i])
			}
			_ = noStore.Ack(context.Background(), c)
		}
	}
	for i, id := range ids {
		if got[id] != string(msgs[i]) {
			t.Fatalf("split batch: message %s missing or changed (%d of 8 arrived)", id, len(got))
		}
	}
	splitReplayOnFIFO(t, noStore)
	// One message too large for a message, with no store: a clear error, nothing sent.
	single := parity.EncodeBatch("split", []string{"x"}, json.RawMessage(strconv.Quote(randomString(300<<10))))
	if err := noStore.Publish(context.Background(), single); !errors.Is(err, core.ErrInvalidPayload) || !errors.Is(err, core.ErrRejected) || errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("one oversized message without an overflow store: %v; want ErrInvalidPayload and ErrRejected, not unavailable", err)
	}
}

func randomString(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	x := uint64(time.Now().UnixNano()) | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = alphabet[x%uint64(len(alphabet))]
	}
	return string(b)
}

// TestDepths: ready, in flight and delayed (native and beyond the cap) add up.
func TestDepths(t *testing.T) {
	t.Parallel()
	be := newSpace(t).client(t, nil)
	for range 3 {
		mustPublish(t, be, batch("depth", false, "r"))
	}
	for _, d := range []time.Duration{time.Minute, time.Hour} {
		b := batch("depth", false, "d")
		b.NotBefore = time.Now().Add(d)
		mustPublish(t, be, b)
	}
	cs := fetchAll(t, be, req("depth", 1, 30*time.Second), 1, 10*time.Second)
	want := core.Depth{Ready: 2, InFlight: 1, Delayed: 2}
	var got core.Depth
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		d, err := be.Depths(context.Background(), []string{"depth", "never-used"})
		if err != nil {
			t.Fatal(err)
		}
		if d["never-used"] != (core.Depth{}) {
			t.Fatalf("unused queue: %+v", d["never-used"])
		}
		if got = d["depth"]; got == want {
			break
		}
	}
	if got != want {
		t.Fatalf("depths %+v; want %+v", got, want)
	}
	_ = be.Ack(context.Background(), cs[0])
}

// TestCloseReleasesStash: a batch received by a poll that outlived its Fetch is given back by
// Close, without counting a delivery, instead of staying hidden for its lease.
func TestCloseReleasesStash(t *testing.T) {
	t.Parallel()
	s := newSpace(t)
	a, b := s.client(t, nil), s.client(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	r := core.FetchRequest{Node: "a", Lease: 30 * time.Second, Wait: 5 * time.Second, Queues: []core.QueueSlots{{Queue: "stash", Free: 1}}}
	if cs, err := a.Fetch(ctx, r); err != nil || len(cs) != 0 {
		t.Fatalf("Fetch: %v %v", cs, err)
	}
	mustPublish(t, b, batch("stash", false, "st")) // the long poll still outstanding gets it
	time.Sleep(500 * time.Millisecond)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	cs := fetchAll(t, b, req("stash", 1, 5*time.Second), 1, 10*time.Second)
	if len(cs) != 1 || cs[0].Deliveries != 1 {
		t.Fatalf("after Close released it: %+v; want one claim with Deliveries 1", cs)
	}
}

// TestOutage: behind a broken proxy Publish and Fetch fail with ErrBackendUnavailable
// quickly; after Restore the same client works.
func TestOutage(t *testing.T) {
	t.Parallel()
	s := newSpace(t)
	be := s.client(t, nil)
	mustPublish(t, be, batch("out", false, "before"))
	s.proxy.Break()
	start := time.Now()
	err := be.Publish(context.Background(), batch("out", false, "during"))
	if !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("Publish during an outage: %v; want ErrBackendUnavailable", err)
	}
	if _, err := be.Fetch(context.Background(), req("out2", 1, time.Second)); !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("Fetch during an outage: %v; want ErrBackendUnavailable", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("outage errors took %v", took)
	}
	s.proxy.Restore()
	mustPublish(t, be, batch("out", false, "after"))
	if cs := fetchAll(t, be, req("out", core.Unlimited, 5*time.Second), 2, 10*time.Second); len(cs) != 2 {
		t.Fatalf("after Restore: %d claims; want 2", len(cs))
	}
}

// TestClosed: calls after Close fail with ErrClosed; Close twice is fine.
func TestClosed(t *testing.T) {
	t.Parallel()
	be := newSpace(t).client(t, nil)
	_ = be.Close()
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if err := be.Publish(context.Background(), batch("c", false, "x")); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
	if _, err := be.Fetch(context.Background(), req("c", 1, time.Second)); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Fetch after Close: %v", err)
	}
}

// TestHeldReceiveReleased: a batch received by a poll that outlived its Fetch, which no
// Fetch takes afterwards (the node's slots for the queue stay full), is given back when half
// its lease is gone, without counting the receive, instead of staying hidden until its
// visibility timeout and coming back with a receive count one higher.
func TestHeldReceiveReleased(t *testing.T) {
	t.Parallel()
	s := newSpace(t)
	a, b := s.client(t, nil), s.client(t, nil)
	lease := 2 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	r := core.FetchRequest{Node: "a", Lease: lease, Wait: 5 * time.Second, Queues: []core.QueueSlots{{Queue: "held", Free: 1}}}
	if cs, err := a.Fetch(ctx, r); err != nil || len(cs) != 0 {
		t.Fatalf("Fetch: %v %v", cs, err)
	}
	mustPublish(t, b, batch("held", false, "h")) // the long poll still outstanding gets it
	time.Sleep(lease + time.Second)              // a never fetches the queue again
	cs := fetchAll(t, b, req("held", 1, 5*time.Second), 1, 10*time.Second)
	if len(cs) != 1 || cs[0].Deliveries != 1 {
		t.Fatalf("after a held it: %+v; want one claim with Deliveries 1", cs)
	}
}
