package sqljobs

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestDelayedPublishNeverEarly(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	due := time.Now().Add(400 * time.Millisecond)
	publish(t, be, "q", "late", due)
	if cs := fetch(t, be, 0, all("q")); len(cs) != 0 {
		t.Fatalf("delayed batch claimed %v early", time.Until(due))
	}
	if d := depth(t, be, "q"); d != (core.Depth{Delayed: 1}) {
		t.Fatalf("depth of a delayed batch = %+v", d)
	}
	// A waiting fetch is woken by its timer at the due time, not before.
	cs, err := be.Fetch(ctxT(t), core.FetchRequest{Node: "n", Queues: []core.QueueSlots{all("q")}, Lease: 10 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got := time.Now()
	if len(cs) != 1 {
		t.Fatalf("got %d claims after waiting, want 1", len(cs))
	}
	if got.Before(due) {
		t.Fatalf("delivered %v before its due time", due.Sub(got))
	}
	if late := got.Sub(due); late > time.Second {
		t.Fatalf("delivered %v after its due time", late)
	}
}

func TestFreeSlotsPerQueueInOneFetch(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	for _, q := range []string{"a", "b", "c", "d", "other"} {
		publishN(t, be, q, 10)
	}
	cs, err := be.Fetch(ctxT(t), core.FetchRequest{Node: "n", Lease: 10 * time.Second, Max: 12, Queues: []core.QueueSlots{
		{Queue: "a", Free: 2}, {Queue: "b", Free: 3}, all("c"), all("d"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, c := range cs {
		got[c.Queue]++
	}
	// Capped queues get their free slots; the others share what is left of Max round-robin.
	if len(cs) != 12 || got["a"] != 2 || got["b"] != 3 || got["c"]+got["d"] != 7 || got["c"]-got["d"] > 1 || got["d"]-got["c"] > 1 {
		t.Fatalf("claims per queue = %v (%d in all), want a 2, b 3 and 7 shared evenly by c and d", got, len(cs))
	}
	if d := depth(t, be, "other"); d.Ready != 10 {
		t.Fatalf("a queue not asked for was touched: %+v", d)
	}
	// Max caps the whole fetch; 0 means core.DefaultFetchMax.
	cs, err = be.Fetch(ctxT(t), core.FetchRequest{Node: "n", Lease: 10 * time.Second, Max: 4, Queues: []core.QueueSlots{all("other"), all("c")}})
	if err != nil || len(cs) != 4 {
		t.Fatalf("Max 4: got %d, %v", len(cs), err)
	}
	publishN(t, be, "many", core.DefaultFetchMax+5)
	if cs := fetch(t, be, 0, all("many")); len(cs) != core.DefaultFetchMax {
		t.Fatalf("no Max: got %d, want core.DefaultFetchMax", len(cs))
	}
}

func TestDepthsAddUp(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	publishN(t, be, "q", 5)
	publish(t, be, "q", "later1", time.Now().Add(time.Hour))
	publish(t, be, "q", "later2", time.Now().Add(time.Hour))
	cs := fetch(t, be, 0, core.QueueSlots{Queue: "q", Free: 2})
	if len(cs) != 2 {
		t.Fatalf("claimed %d", len(cs))
	}
	ds, err := be.Depths(ctxT(t), []string{"q", "empty"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (core.Depth{Ready: 3, InFlight: 2, Delayed: 2}); ds["q"].Counts() != want {
		t.Fatalf("depth = %+v, want %+v", ds["q"], want)
	}
	if ds["empty"] != (core.Depth{}) {
		t.Fatalf("empty queue depth = %+v", ds["empty"])
	}
}

func TestFetchHonoursContext(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	cs, err := be.Fetch(ctx, core.FetchRequest{Node: "n", Queues: []core.QueueSlots{all("q")}, Wait: 10 * time.Second})
	if err != nil || len(cs) != 0 {
		t.Fatalf("cancelled fetch = %d claims, %v; want none and nil", len(cs), err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cancelled fetch returned after %v", d)
	}
	// An already cancelled context claims nothing and strands nothing.
	publish(t, be, "q", "b", time.Time{})
	if cs, err := be.Fetch(ctx, core.FetchRequest{Node: "n", Queues: []core.QueueSlots{all("q")}}); err != nil || len(cs) != 0 {
		t.Fatalf("fetch with a cancelled ctx = %d, %v", len(cs), err)
	}
	if d := depth(t, be, "q"); d.Ready != 1 {
		t.Fatalf("depth = %+v", d)
	}
}

// TestNotifyWakesIdleFetch: an idle node waiting in Fetch gets a batch published on another
// node within milliseconds (LISTEN/NOTIFY), not at the end of its wait.
func TestNotifyWakesIdleFetch(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	pub, sub := w.backend(nil), w.backend(nil)
	var lat []time.Duration
	for i := range 5 {
		type result struct {
			cs  []*core.Claim
			err error
			at  time.Time
		}
		done := make(chan result, 1)
		go func() {
			cs, err := sub.Fetch(context.Background(), core.FetchRequest{Node: "sub", Queues: []core.QueueSlots{all("q")}, Lease: 10 * time.Second, Wait: 10 * time.Second})
			done <- result{cs, err, time.Now()}
		}()
		time.Sleep(300 * time.Millisecond) // let it reach its wait (LISTEN is up after the first round)
		sent := time.Now()
		publish(t, pub, "q", fmt.Sprint("b", i), time.Time{})
		r := <-done
		if r.err != nil || len(r.cs) != 1 {
			t.Fatalf("round %d: %d claims, %v", i, len(r.cs), r.err)
		}
		lat = append(lat, r.at.Sub(sent))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("NOTIFY wake latency: %v", lat)
	if med := lat[len(lat)/2]; med > 200*time.Millisecond {
		t.Fatalf("median wake latency %v, want < 200ms (latencies %v)", med, lat)
	}
	if lat[len(lat)-1] > 2*time.Second {
		t.Fatalf("worst wake latency %v: woken by the poll, not by NOTIFY", lat[len(lat)-1])
	}
}

// TestIdleThousandQueuesIsOneQuery: a node listening to 1,000 idle queues runs about one
// statement per poll wait, not one per queue, and that statement is cheap.
func TestIdleThousandQueuesIsOneQuery(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	tr := &countingTracer{}
	be := w.backendOn(w.pool(tr), nil)
	queues := make([]core.QueueSlots, 1000)
	for i := range queues {
		queues[i] = all(fmt.Sprintf("idle-%04d", i))
	}
	// Some history in the table, so the probes are real.
	other := w.backend(nil)
	publishN(t, other, "busy", 200)
	req := core.FetchRequest{Node: "n", Queues: queues, Lease: time.Second, Wait: 200 * time.Millisecond}
	if _, err := be.Fetch(ctxT(t), req); err != nil { // the first also writes heartbeats
		t.Fatal(err)
	}
	before := tr.n.Load()
	const rounds = 5
	start := time.Now()
	for range rounds {
		cs, err := be.Fetch(ctxT(t), req)
		if err != nil || len(cs) != 0 {
			t.Fatalf("idle fetch = %d, %v", len(cs), err)
		}
	}
	elapsed := time.Since(start)
	n := tr.n.Load() - before
	t.Logf("%d idle fetches of 1,000 queues: %d statements in %v", rounds, n, elapsed)
	if n > rounds {
		t.Fatalf("%d statements for %d idle fetches; want at most one each", n, rounds)
	}
	// The statement itself: time one claim with Wait 0.
	req.Wait = 0
	t0 := time.Now()
	const probes = 5
	for range probes {
		if _, err := be.Fetch(ctxT(t), req); err != nil {
			t.Fatal(err)
		}
	}
	per := time.Since(t0) / probes
	t.Logf("one idle claim statement over 1,000 queues: %v", per)
	if per > 250*time.Millisecond {
		t.Fatalf("an idle claim over 1,000 queues takes %v; want a cheap index probe per queue", per)
	}
}
