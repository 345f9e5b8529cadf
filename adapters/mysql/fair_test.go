package mysql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// A fair claim of several batches goes round the keys, one batch per key per round, and the
// next claim starts after the last key served; a key at its KeyLimit is passed over.
func TestFairClaimRoundRobin(t *testing.T) {
	t.Parallel()
	be := newWorld(t).backend(nil)
	ctx := context.Background()
	const queue = "rr"
	pub := func(id, key string) {
		t.Helper()
		if err := be.Publish(ctx, core.OutgoingBatch{ID: id, Queue: queue, Body: []byte(id), FairKey: key}); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
	}
	for i := range 6 {
		pub(fmt.Sprint("a", i), "a")
	}
	pub("b0", "b")
	pub("c0", "c")
	keys := func(cs []*core.Claim) string {
		var s string
		for _, c := range cs {
			s += c.ID[:1]
		}
		return s
	}
	fair := core.QueueSlots{Queue: queue, Free: 4, Fair: true}
	if got := keys(fetch(t, be, time.Minute, fair)); got != "abca" {
		t.Fatalf("a claim of 4 across keys a (6 batches), b and c (1 each) handed out %q; want abca", got)
	}
	fair.Free, fair.KeyLimit = 4, 3 // key a runs 2 and may take 1 more; b and c have nothing ready
	if got := keys(fetch(t, be, time.Minute, fair)); got != "a" {
		t.Fatalf("with KeyLimit 3 and 2 of key a running, a claim handed out %q; want a", got)
	}
}
