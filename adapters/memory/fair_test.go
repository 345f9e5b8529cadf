package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestFairRoundRobin: on a fair queue, claims go round-robin across the keys with ready
// batches (a new key joins the end of the turn), ranked within a key on a prioritized queue;
// a retried batch rejoins its key's lane, a cancelled one leaves it, and Depths counts every
// lane.
func TestFairRoundRobin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		ranked bool
	}{{"random within a key", false}, {"ranked within a key", true}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			be, _ := newFake(t)
			pub := func(id, key string, lead time.Duration) {
				t.Helper()
				must(t, be.Publish(ctx, core.OutgoingBatch{ID: id, Queue: "q", Body: []byte(id), FairKey: key, Lead: lead}))
			}
			publish(t, be, "q", "plain", time.Time{}) // before the queue is fair: the empty key
			for i := range 5 {
				var lead time.Duration
				if tt.ranked {
					lead = time.Duration(i) * time.Second // big-4 first
				}
				pub(fmt.Sprint("big-", i), "big", lead)
			}
			pub("lone", "lone", 0)
			if d := depth(t, be, "q"); d.Ready != 7 {
				t.Fatalf("Ready = %d; want 7", d.Ready)
			}
			var keys []string
			var claims []*core.Claim
			for range 4 {
				cs := fetch(t, be, one("q"))
				if len(cs) != 1 {
					t.Fatalf("fetch: %d claims; want 1", len(cs))
				}
				claims = append(claims, cs[0])
				keys = append(keys, string(cs[0].Body))
			}
			if keys[0] != "body-plain" || keys[2] != "lone" || keys[1][:4] != "big-" || keys[3][:4] != "big-" {
				t.Fatalf("claims %v; want plain, big, lone, big (the keys in turn)", keys)
			}
			if tt.ranked && (keys[1] != "big-4" || keys[3] != "big-3") {
				t.Fatalf("claims %v; want big-4 then big-3 within the key (by lead)", keys)
			}
			// A retried batch rejoins its lane at the end of the turn: big, then lone.
			must(t, be.Retry(ctx, claims[2], nil, 0))
			for _, want := range []string{"big-", "lone"} {
				if cs := fetch(t, be, one("q")); len(cs) != 1 || string(cs[0].Body)[:4] != want {
					t.Fatalf("after a retry of lone: %v; want a claim of %s (the keys in turn)", cs, want)
				}
			}
			// A cancelled ready batch leaves its lane.
			left := 2
			for _, id := range []string{"big-0", "big-1", "big-2", "big-3", "big-4"} {
				if err := be.ReplaceBatch(ctx, "q", id, nil); err == nil {
					left--
					break
				}
			}
			if d := depth(t, be, "q"); d.Ready != int64(left) {
				t.Fatalf("Ready after a cancel = %d; want %d", d.Ready, left)
			}
			for range left {
				if cs := fetch(t, be, one("q")); len(cs) != 1 {
					t.Fatalf("fetch: %d claims; want 1", len(cs))
				}
			}
			if cs := fetch(t, be, one("q")); len(cs) != 0 {
				t.Fatalf("fetch after the last: %d claims; want 0", len(cs))
			}
		})
	}
}
