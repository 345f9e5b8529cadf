package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// fetchIDs claims up to max batches of queue (fair or not) and returns their ids in the order
// the claim script handed them out, acking none.
func fetchIDs(t *testing.T, be *Backend, queue string, max int, fair bool) []*core.Claim {
	t.Helper()
	claims, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n", Max: max, Lease: time.Minute,
		Queues: []core.QueueSlots{{Queue: queue, Free: max, Fair: fair}}})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	return claims
}

// publishFair stores batch id of queue with fairness key fk ("" for none).
func publishFair(t *testing.T, be *Backend, queue, id, fk string) {
	t.Helper()
	if err := be.Publish(context.Background(), core.OutgoingBatch{ID: id, Queue: queue, Body: []byte("b-" + id), FairKey: fk}); err != nil {
		t.Fatalf("publish %s: %v", id, err)
	}
}

// A queue's switch to Fair and back strands nothing: batches stored before it became fair
// (no key) are claimed by the fair claim, in the empty key's turn, and a queue no longer
// claimed fairly takes its keyed batches from the due set, leaving no key in the turn.
func TestFairSwitchOverStrandsNothing(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	ctx := context.Background()
	for n, tc := range []struct {
		name      string
		keys      []string // the fairness key of each batch, in publish order
		fairClaim bool
	}{
		{"stored before Fair, claimed fairly", []string{"", "", ""}, true},
		{"stored fair, claimed after Fair was turned off", []string{"a", "a", "b"}, false},
		{"mixed, claimed fairly", []string{"", "a", "", "b"}, true},
	} {
		queue := fmt.Sprintf("sw%d", n)
		for i, fk := range tc.keys {
			publishFair(t, be, queue, fmt.Sprintf("%s-%d", queue, i), fk)
		}
		seen := map[string]bool{}
		for range len(tc.keys) + 2 {
			for _, c := range fetchIDs(t, be, queue, 2, tc.fairClaim) {
				if seen[c.ID] {
					t.Fatalf("%s: batch %s claimed twice", tc.name, c.ID)
				}
				seen[c.ID] = true
				if err := be.Ack(ctx, c); err != nil {
					t.Fatalf("%s: Ack: %v", tc.name, err)
				}
			}
		}
		if len(seen) != len(tc.keys) {
			t.Fatalf("%s: claimed %d of %d batches", tc.name, len(seen), len(tc.keys))
		}
		marker := be.keys.keys(queue).script[9]
		if n, err := be.rdb.Exists(ctx, marker+":key", marker+":ring").Result(); err != nil || n != 0 {
			t.Fatalf("%s: fairness keys or ring left behind after every batch was acked: %d (%v)", tc.name, n, err)
		}
	}
}

// A fair claim of several batches goes round the keys, one batch per key per round, and a
// batch that is retried or whose lease ran out comes back in its key's turn.
func TestFairClaimRoundRobinAndRetry(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	ctx := context.Background()
	const queue = "rr"
	for i := range 6 {
		publishFair(t, be, queue, fmt.Sprintf("a%d", i), "a")
	}
	publishFair(t, be, queue, "b0", "b")
	publishFair(t, be, queue, "c0", "c")
	claims := fetchIDs(t, be, queue, 4, true)
	var got []string
	for _, c := range claims {
		got = append(got, c.ID[:1])
	}
	if fmt.Sprint(got) != "[a b c a]" {
		t.Fatalf("a claim of 4 across keys a (6 batches), b and c (1 each) handed out %v; want [a b c a]", got)
	}
	// b's batch is retried: it is ready again in key b's turn, ahead of a's backlog.
	for _, c := range claims {
		if c.ID[:1] == "b" {
			if err := be.Retry(ctx, c, nil, 0); err != nil {
				t.Fatalf("Retry: %v", err)
			}
		}
	}
	next := fetchIDs(t, be, queue, 2, true)
	if len(next) != 2 || next[0].ID[:1] == next[1].ID[:1] {
		t.Fatalf("after b's retry a claim of 2 handed out %d batches starting with %v; want one of a and the retried b", len(next), next)
	}
}

// Operator edits keep a fair queue's turn right: a cancelled batch leaves its key's set (and
// the key the turn, when it was the key's last), and an expedited delayed batch becomes
// claimable in its key's turn.
func TestFairEdits(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	ctx := context.Background()
	const queue = "ed"
	publishFair(t, be, queue, "a0", "a")
	publishFair(t, be, queue, "b0", "b")
	if err := be.Publish(ctx, core.OutgoingBatch{ID: "c0", Queue: queue, Body: []byte("c"), FairKey: "c", NotBefore: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := be.ReplaceBatch(ctx, queue, "b0", nil); err != nil {
		t.Fatalf("cancel b0: %v", err)
	}
	if err := be.ExpediteBatch(ctx, queue, "c0", []byte("c")); err != nil {
		t.Fatalf("expedite c0: %v", err)
	}
	ring, err := be.rdb.ZRange(ctx, be.keys.keys(queue).script[9]+":ring", 0, -1).Result()
	if err != nil || fmt.Sprint(ring) != "[a c]" {
		t.Fatalf("turn after cancelling b's only batch and expediting c's: %v (%v); want [a c]", ring, err)
	}
	var got []string
	for _, c := range fetchIDs(t, be, queue, 10, true) {
		got = append(got, c.ID)
	}
	if fmt.Sprint(got) != "[a0 c0]" {
		t.Fatalf("claimed %v; want [a0 c0]", got)
	}
}
