package memory

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestDueNeverEarly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		notBefore time.Duration // relative to the publish time; 0 means the zero time
		zero      bool
	}{
		{name: "zero NotBefore is due now", zero: true},
		{name: "past NotBefore is due now", notBefore: -time.Hour},
		{name: "one second", notBefore: time.Second},
		{name: "one nanosecond", notBefore: time.Nanosecond},
		{name: "a day", notBefore: 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			be, clk := newFake(t)
			var nb time.Time
			if !tt.zero {
				nb = clk.Now().Add(tt.notBefore)
			}
			publish(t, be, "q", "b1", nb)
			if nb.After(clk.Now()) {
				if d := depth(t, be, "q"); d != (core.Depth{Delayed: 1}) {
					t.Fatalf("depth before due = %+v, want 1 delayed", d)
				}
				clk.Advance(nb.Sub(clk.Now()) - time.Nanosecond)
				if cs := fetch(t, be, all("q")); len(cs) != 0 {
					t.Fatalf("claimed %d batches 1ns before NotBefore", len(cs))
				}
				clk.Advance(time.Nanosecond)
			}
			cs := fetch(t, be, all("q"))
			if len(cs) != 1 || cs[0].ID != "b1" || cs[0].Deliveries != 1 {
				t.Fatalf("at NotBefore got %+v, want b1 with Deliveries 1", cs)
			}
		})
	}
}

func TestFreeSlots(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		slots []core.QueueSlots
		max   int
		want  map[string]int
	}{
		{name: "free 1", slots: []core.QueueSlots{one("a")}, want: map[string]int{"a": 1}},
		{name: "free 3", slots: []core.QueueSlots{{Queue: "a", Free: 3}}, want: map[string]int{"a": 3}},
		{name: "free above stock", slots: []core.QueueSlots{{Queue: "a", Free: 50}}, want: map[string]int{"a": 10}},
		{name: "unlimited", slots: []core.QueueSlots{all("a")}, want: map[string]int{"a": 10}},
		{name: "unlimited with max", slots: []core.QueueSlots{all("a")}, max: 4, want: map[string]int{"a": 4}},
		{name: "two queues", slots: []core.QueueSlots{{Queue: "a", Free: 2}, {Queue: "b", Free: 5}}, want: map[string]int{"a": 2, "b": 5}},
		{name: "only requested queues", slots: []core.QueueSlots{all("b")}, want: map[string]int{"b": 10}},
		{name: "unknown queue", slots: []core.QueueSlots{all("nope")}, want: map[string]int{}},
		{name: "exclusive caps at one", slots: []core.QueueSlots{{Queue: "a", Free: core.Unlimited, Exclusive: true}}, want: map[string]int{"a": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			be, _ := newFake(t)
			publishN(t, be, "a", 10)
			publishN(t, be, "b", 10)
			publishN(t, be, "c", 10)
			cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n", Queues: tt.slots, Lease: time.Minute, Max: tt.max})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, c := range cs {
				got[c.Queue]++
			}
			if len(got) != len(tt.want) {
				t.Fatalf("claimed %v, want %v", got, tt.want)
			}
			for q, n := range tt.want {
				if got[q] != n {
					t.Fatalf("claimed %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestMaxCapsTheWholeFetch(t *testing.T) {
	t.Parallel()
	be := New(nil)
	defer be.Close()
	publishN(t, be, "a", 5)
	publishN(t, be, "b", 5)
	publishN(t, be, "c", 5)
	cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n1", Lease: 10 * time.Second, Max: 4,
		Queues: []core.QueueSlots{all("a"), all("b"), {Queue: "c", Free: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 4 {
		t.Fatalf("claimed %d, want Max 4 across the queues", len(cs))
	}
	c := 0
	for _, cl := range cs {
		if cl.Queue == "c" {
			c++
		}
	}
	if c > 2 {
		t.Fatalf("claimed %d of queue c with 2 free slots", c)
	}
	// Max 0 means core.DefaultFetchMax.
	publishN(t, be, "d", core.DefaultFetchMax+5)
	if cs := fetch(t, be, all("d")); len(cs) != core.DefaultFetchMax {
		t.Fatalf("claimed %d without a Max, want core.DefaultFetchMax", len(cs))
	}
}

// TestNotFIFO guards TRAPS 11: a FIFO memory backend hides order-dependent listeners.
func TestNotFIFO(t *testing.T) {
	t.Parallel()
	be, _ := newFake(t)
	const n = 100
	publishN(t, be, "q", n)
	var publishOrder, fetchOrder []string
	for i := range n {
		publishOrder = append(publishOrder, "q-"+strconv.Itoa(i))
	}
	for range n {
		cs := fetch(t, be, one("q"))
		if len(cs) != 1 {
			t.Fatalf("claimed %d, want 1", len(cs))
		}
		fetchOrder = append(fetchOrder, cs[0].ID)
	}
	if slices.Equal(publishOrder, fetchOrder) {
		t.Fatal("100 batches came out in publish order; the memory backend must not be FIFO")
	}
	slices.Sort(publishOrder)
	slices.Sort(fetchOrder)
	if !slices.Equal(publishOrder, fetchOrder) {
		t.Fatal("fetched a different set of batches than published")
	}
}

// TestPickNearOldest: each claim is one of the pickWindow oldest ready batches, so a backlog
// drains close to publish order (and its oldest batch waits for at most pickWindow claims),
// yet the order is not FIFO.
func TestPickNearOldest(t *testing.T) {
	t.Parallel()
	be, _ := newFake(t)
	const n = 200
	publishN(t, be, "q", n)
	left := make([]string, 0, n) // the ready batches, oldest first
	for i := range n {
		left = append(left, "q-"+strconv.Itoa(i))
	}
	fifo := true
	for range n {
		cs := fetch(t, be, one("q"))
		if len(cs) != 1 {
			t.Fatalf("claimed %d, want 1", len(cs))
		}
		at := slices.Index(left, cs[0].ID)
		if at < 0 || at >= pickWindow {
			t.Fatalf("claimed %s, number %d by age of the %d ready; want one of the %d oldest", cs[0].ID, at, len(left), pickWindow)
		}
		fifo = fifo && at == 0
		left = slices.Delete(left, at, at+1)
	}
	if fifo {
		t.Fatal("the batches came out in publish order; the memory backend must not be FIFO")
	}
}

func TestSeedReproducible(t *testing.T) {
	t.Parallel()
	order := func() []string {
		be := New(&Options{Seed: 42})
		defer be.Close()
		publishN(t, be, "q", 20)
		var ids []string
		for range 20 {
			ids = append(ids, fetch(t, be, one("q"))[0].ID)
		}
		return ids
	}
	if a, b := order(), order(); !slices.Equal(a, b) {
		t.Fatalf("same seed, different orders:\n%v\n%v", a, b)
	}
}

func TestFetchWaitWakes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// setup runs before the fetch waits and returns the trigger, which makes b1 of queue
		// "q" claimable while the fetch waits and returns when it may first be claimed.
		setup func(t *testing.T, be *Backend) (trigger func() time.Time)
	}{
		{name: "publish", setup: func(t *testing.T, be *Backend) func() time.Time {
			return func() time.Time {
				publish(t, be, "q", "b1", time.Time{})
				return time.Now()
			}
		}},
		{name: "delayed publish comes due", setup: func(t *testing.T, be *Backend) func() time.Time {
			return func() time.Time {
				due := time.Now().Add(50 * time.Millisecond)
				publish(t, be, "q", "b1", due)
				return due
			}
		}},
		{name: "retry", setup: func(t *testing.T, be *Backend) func() time.Time {
			publish(t, be, "q", "b1", time.Time{})
			held := fetch(t, be, one("q"))[0]
			return func() time.Time {
				if err := be.Retry(context.Background(), held, []byte("v2"), 0); err != nil {
					t.Fatal(err)
				}
				return time.Now()
			}
		}},
		{name: "lease expiry", setup: func(t *testing.T, be *Backend) func() time.Time {
			publish(t, be, "q", "b1", time.Time{})
			cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n1", Queues: []core.QueueSlots{one("q")}, Lease: 50 * time.Millisecond})
			if err != nil || len(cs) != 1 {
				t.Fatalf("fetch: %v, %v", cs, err)
			}
			return func() time.Time { return cs[0].LeaseUntil }
		}},
		{name: "exclusive released by ack", setup: func(t *testing.T, be *Backend) func() time.Time {
			publish(t, be, "q", "b0", time.Time{})
			held := fetch(t, be, core.QueueSlots{Queue: "q", Free: 1, Exclusive: true})[0]
			publish(t, be, "q", "b1", time.Time{})
			return func() time.Time {
				if err := be.Ack(context.Background(), held); err != nil {
					t.Fatal(err)
				}
				return time.Now()
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			be := newReal(t)
			trigger := tt.setup(t, be)
			done := make(chan []*core.Claim, 1)
			go func() {
				slots := []core.QueueSlots{one("other"), {Queue: "q", Free: 1, Exclusive: tt.name == "exclusive released by ack"}}
				cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n2", Queues: slots, Lease: time.Minute, Wait: 10 * time.Second})
				if err != nil {
					t.Error(err)
				}
				done <- cs
			}()
			waitForWaiters(t, be, "q", 1)
			due := trigger()
			cs := <-done
			returned := time.Now()
			if len(cs) != 1 || cs[0].ID != "b1" {
				t.Fatalf("got %+v, want b1", cs)
			}
			if returned.Before(due) {
				t.Fatalf("returned %v before the batch was claimable", due.Sub(returned))
			}
			if late := returned.Sub(due); late > 500*time.Millisecond {
				t.Fatalf("woke %v after the batch became claimable, want milliseconds", late)
			}
		})
	}
}

func TestFetchWaitTimesOut(t *testing.T) {
	t.Parallel()
	be := newReal(t)
	publish(t, be, "other", "x", time.Time{}) // not requested: must not wake or be claimed
	start := time.Now()
	cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n", Queues: []core.QueueSlots{one("q")}, Lease: time.Minute, Wait: 30 * time.Millisecond})
	if err != nil || cs == nil || len(cs) != 0 {
		t.Fatalf("got %v, %v; want an empty slice and nil", cs, err)
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Fatalf("returned after %v, before Wait", el)
	}
}

func TestFetchContextCancel(t *testing.T) {
	t.Parallel()
	be := newReal(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		cs, err := be.Fetch(ctx, core.FetchRequest{Node: "n", Queues: []core.QueueSlots{one("q")}, Lease: time.Minute, Wait: time.Minute})
		if len(cs) != 0 {
			t.Errorf("claimed %d after cancel", len(cs))
		}
		done <- err
	}()
	waitForWaiters(t, be, "q", 1)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("cancelled fetch returned %v, want nil", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("cancelled fetch did not return")
	}
	// The waiter is gone and nothing was stranded in flight.
	publish(t, be, "q", "b1", time.Time{})
	if d := depth(t, be, "q"); d != (core.Depth{Ready: 1}) {
		t.Fatalf("depth = %+v, want 1 ready", d)
	}
}
