package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/backendtest"
)

// fairIDs returns the claims' ids joined by spaces.
func fairIDs(cs []*core.Claim) string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return strings.Join(ids, " ")
}

// A fair claim of several batches goes round the keys, one batch per key per round, and the
// next claim starts after the last key served; a key at its KeyLimit is passed over.
func TestFairClaimRoundRobin(t *testing.T) {
	t.Parallel()
	backendtest.FairRoundRobin(t, newWorld(t).backend(nil), "rr")
}

// Claims of one go round every key with a ready batch, the empty key included, starting after
// the last key served and wrapping past the last key to the first; a key with nothing ready
// (its batch delayed) is passed over.
func TestFairTurnWraps(t *testing.T) {
	t.Parallel()
	be := newWorld(t).backend(nil)
	ctx := context.Background()
	const queue = "wrap"
	for i := range 2 {
		for _, k := range []string{"", "a", "b"} {
			id := fmt.Sprintf("%s%d", k, i)
			if k == "" {
				id = fmt.Sprint("e", i)
			}
			if err := be.Publish(ctx, core.OutgoingBatch{ID: id, Queue: queue, Body: []byte(id), FairKey: k}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := be.Publish(ctx, core.OutgoingBatch{ID: "later", Queue: queue, Body: []byte("x"), FairKey: "0", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 6 {
		got = append(got, fairIDs(fetch(t, be, time.Minute, core.QueueSlots{Queue: queue, Free: 1, Fair: true})))
	}
	if s := strings.Join(got, " "); s != "a0 b0 e0 a1 b1 e1" {
		t.Fatalf("six claims of one handed out %q; want a0 b0 e0 a1 b1 e1 (after the turn's key '', round the keys, the delayed key 0 passed over)", s)
	}
	if cs := fetch(t, be, time.Minute, core.QueueSlots{Queue: queue, Free: 1, Fair: true}); len(cs) != 0 {
		t.Fatalf("a seventh claim handed out %q; want nothing (only a delayed batch is left)", fairIDs(cs))
	}
}

// On a queue both Fair and Prioritized the turn picks the key, and within the key the batch
// with the earliest due time minus lead goes first.
func TestFairPrioritizedWithinKey(t *testing.T) {
	t.Parallel()
	be := newWorld(t).backend(nil)
	ctx := context.Background()
	const queue = "fairprio"
	pub := func(id, key string, prio int) {
		t.Helper()
		b := core.OutgoingBatch{ID: id, Queue: queue, Body: []byte(id), FairKey: key, Priority: prio, Lead: time.Duration(prio) * time.Hour}
		if err := be.Publish(ctx, b); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
	}
	pub("a-low", "a", 0)
	pub("a-high", "a", 5)
	pub("b-low", "b", 0)
	pub("b-mid", "b", 2)
	slots := core.QueueSlots{Queue: queue, Free: 4, Fair: true, Prioritized: true}
	if got := fairIDs(fetch(t, be, time.Minute, slots)); got != "a-high b-mid a-low b-low" {
		t.Fatalf("a claim of 4 handed out %q; want a-high b-mid a-low b-low (keys in turn, each by priority)", got)
	}
}
