package sqs

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// gateHTTP counts SQS calls by operation and holds each GetQueueUrl until hold of them are in
// flight at once or wait has passed (a bounded window for concurrent lookups to show).
type gateHTTP struct {
	hold int
	wait time.Duration

	mu       sync.Mutex
	calls    map[string]int
	inflight int
	peak     int
	gate     chan struct{} // closed when hold lookups are in flight
	opened   bool          // gate is closed
}

func newGateHTTP(hold int, wait time.Duration) *gateHTTP {
	return &gateHTTP{hold: hold, wait: wait, calls: map[string]int{}, gate: make(chan struct{})}
}

func (g *gateHTTP) Do(r *http.Request) (*http.Response, error) {
	op := r.Header.Get("X-Amz-Target") // "AmazonSQS.GetQueueUrl"
	g.mu.Lock()
	g.calls[op]++
	lookup := op == "AmazonSQS.GetQueueUrl"
	if lookup {
		g.inflight++
		g.peak = max(g.peak, g.inflight)
		if g.inflight == g.hold && !g.opened { // a later wave can reach hold again
			g.opened = true
			close(g.gate)
		}
	}
	g.mu.Unlock()
	if lookup {
		select {
		case <-g.gate:
		case <-time.After(g.wait):
		case <-r.Context().Done():
		}
	}
	resp, err := http.DefaultClient.Do(r)
	if lookup {
		g.mu.Lock()
		g.inflight--
		g.mu.Unlock()
	}
	return resp, err
}

func (g *gateHTTP) count(op string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls["AmazonSQS."+op]
}

func (g *gateHTTP) peakLookups() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak
}

// TestFirstUseLookedUpOnce: many batches published at once to a queue this client has not
// used yet (a node's flush of a burst) share one GetQueueUrl and one CreateQueue. Each making
// its own made a flush of many new queues so slow on a busy server that core's flush deadline
// ran out and whole queues' batches were dropped.
func TestFirstUseLookedUpOnce(t *testing.T) {
	t.Parallel()
	s := newSpace(t)
	const publishers = 8
	g := newGateHTTP(publishers, 500*time.Millisecond)
	be := s.client(t, &Options{HTTPClient: g})
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	for i := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- be.Publish(context.Background(), batch("firstuse", false, fmt.Sprint(i)))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	if n := g.count("GetQueueUrl"); n != 1 {
		t.Errorf("%d concurrent first publishes made %d GetQueueUrl calls; want 1", publishers, n)
	}
	if n := g.count("CreateQueue"); n != 1 {
		t.Errorf("%d concurrent first publishes made %d CreateQueue calls; want 1", publishers, n)
	}
	if n := g.count("SendMessage"); n != publishers {
		t.Errorf("%d SendMessage calls; want %d", n, publishers)
	}
	got := fetchAll(t, be, req("firstuse", core.Unlimited, 30*time.Second), publishers, 20*time.Second)
	if len(got) != publishers {
		t.Fatalf("fetched %d of %d batches", len(got), publishers)
	}
}

// TestFetchLooksUpQueuesConcurrently: a Fetch over many queues it has not used yet looks them
// up (and creates them) concurrently, not one round trip after another before any poll starts.
func TestFetchLooksUpQueuesConcurrently(t *testing.T) {
	t.Parallel()
	s := newSpace(t)
	const queues = 10
	g := newGateHTTP(2, 300*time.Millisecond)
	be := s.client(t, &Options{HTTPClient: g})
	r := core.FetchRequest{Node: "n", Lease: 30 * time.Second, Wait: time.Second}
	for i := range queues {
		r.Queues = append(r.Queues, core.QueueSlots{Queue: fmt.Sprintf("many%d", i), Free: core.Unlimited})
	}
	last := r.Queues[queues-1].Queue
	pub := s.client(t, nil)
	mustPublish(t, pub, batch(last, false, "x"))
	got := fetchAll(t, be, r, 1, 20*time.Second)
	if len(got) != 1 || got[0].Queue != last {
		t.Fatalf("fetched %d claims; want the one batch of %s", len(got), last)
	}
	if p := g.peakLookups(); p < 2 {
		t.Errorf("a Fetch over %d new queues had at most %d GetQueueUrl in flight at once; want them concurrent", queues, p)
	}
}
