package sqljobs

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestClusterLimitClaims: two backends (two nodes) claiming a queue with Limit 3 get 3 batches
// between them, a fair queue with KeyLimit 1 one batch per key, a prioritized queue with Limit 2
// its two first by priority; an Ack gives a slot back, and so does a lease that ran out.
func TestClusterLimitClaims(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.backend(nil), w.backend(nil)
	publishN(t, a, "lim", 10)
	slots := core.QueueSlots{Queue: "lim", Free: 10, Limit: 3}
	got := append(fetch(t, a, 0, slots), fetch(t, b, 0, slots)...)
	if len(got) != 3 {
		t.Fatalf("two nodes claimed %d batches of a queue with Limit 3; want 3", len(got))
	}
	if err := a.Ack(ctxT(t), got[0]); err != nil {
		t.Fatal(err)
	}
	if n := len(fetch(t, b, 0, slots)); n != 1 {
		t.Fatalf("after an Ack, claimed %d; want the one slot it freed", n)
	}
	publishN(t, a, "lim2", 4)
	s2 := core.QueueSlots{Queue: "lim2", Free: 4, Limit: 2}
	first := fetch(t, a, 200*time.Millisecond, s2)
	if len(first) != 2 {
		t.Fatalf("claimed %d of a queue with Limit 2; want 2", len(first))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n := len(fetch(t, b, 0, s2)); n > 0 {
			if time.Now().Before(first[0].LeaseUntil) && time.Now().Before(first[1].LeaseUntil) {
				t.Fatalf("claimed %d while both leases of the limit still ran", n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slots of expired leases never came back")
		}
		time.Sleep(20 * time.Millisecond) // polling the table for the lease's end
	}
	for i := range 6 {
		key := fmt.Sprintf("t%d", i%3)
		if err := a.Publish(ctxT(t), core.OutgoingBatch{ID: fmt.Sprintf("f%d", i), Queue: "fairlim", Body: []byte("{}"), Messages: 1, FairKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	fs := core.QueueSlots{Queue: "fairlim", Free: 10, Fair: true, KeyLimit: 1}
	got = append(fetch(t, a, 0, fs), fetch(t, b, 0, fs)...)
	if len(got) != 3 {
		t.Fatalf("claimed %d batches of a fair queue with KeyLimit 1 and three keys; want 3", len(got))
	}
	// A prioritized queue with a limit: the limit holds, and the highest priority goes first.
	for i := range 5 {
		if err := a.Publish(ctxT(t), core.OutgoingBatch{ID: fmt.Sprintf("p%d", i), Queue: "priolim", Body: []byte("{}"), Messages: 1, Priority: i, Lead: time.Duration(i) * time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	ps := core.QueueSlots{Queue: "priolim", Free: 1, Prioritized: true, Limit: 2}
	got = append(fetch(t, a, 0, ps), fetch(t, b, 0, ps)...)
	got = append(got, fetch(t, a, 0, ps)...)
	if len(got) != 2 || got[0].ID != "p4" || got[1].ID != "p3" {
		ids := []string{}
		for _, c := range got {
			ids = append(ids, c.ID)
		}
		t.Fatalf("claimed %v of a prioritized queue with Limit 2; want [p4 p3]", ids)
	}
}

// TestClaimLimitCost compares the cost of claiming (and acking) batches of a queue with and
// without a cluster-wide limit, in interleaved rounds in one run: a plain queue against one
// with Limit 1000 (a limit that never binds: the price of the lock, the count and the Ack's
// wake-up), and a fair queue against one with Limit and KeyLimit 1000. It logs each pair's
// ratio, and runs only with TXMQ_BENCH_LIMIT=1:
//
//	TXMQ_BENCH_LIMIT=1 go test -run TestClaimLimitCost -v ./adapters/sqljobs
func TestClaimLimitCost(t *testing.T) {
	if os.Getenv("TXMQ_BENCH_LIMIT") == "" {
		t.Skip("set TXMQ_BENCH_LIMIT=1 to measure the claim cost of a cluster-wide limit")
	}
	w := newWorld(t)
	be := w.backend(nil)
	const rows, rounds, free = 4000, 400, 4
	for _, q := range []string{"off", "on", "fairoff", "fairon"} {
		for i := range rows {
			if err := be.Publish(ctxT(t), core.OutgoingBatch{ID: fmt.Sprintf("%s-%d", q, i), Queue: q, Body: []byte("{}"), Messages: 1, FairKey: fmt.Sprintf("t%d", i%20)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pairs := []struct {
		name    string
		off, on core.QueueSlots
	}{
		{"plain", core.QueueSlots{Queue: "off", Free: free}, core.QueueSlots{Queue: "on", Free: free, Limit: 1000}},
		{"fair", core.QueueSlots{Queue: "fairoff", Free: free, Fair: true}, core.QueueSlots{Queue: "fairon", Free: free, Fair: true, Limit: 1000, KeyLimit: 1000}},
	}
	for _, p := range pairs {
		var took [2]time.Duration
		for r := range rounds {
			for k, s := range []core.QueueSlots{p.off, p.on} {
				if r%2 == 1 {
					s = []core.QueueSlots{p.on, p.off}[k]
					k = 1 - k
				}
				start := time.Now()
				cs := fetch(t, be, 0, s)
				for _, c := range cs {
					if err := be.Ack(context.Background(), c); err != nil {
						t.Fatal(err)
					}
				}
				took[k] += time.Since(start)
			}
		}
		t.Logf("%s: %d rounds of claim %d + ack: limit off %v, on %v, ratio on/off %.2f", p.name, rounds, free, took[0], took[1], float64(took[1])/float64(took[0]))
	}
}
