package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// TestFlushInPartsStoresEveryMessageOnce: a flush large enough to be stored in several parts
// stores each message exactly once, in full batches but for at most one per part; an
// ordered queue's flush, never cut, keeps each key's batches in publish order.
func TestFlushInPartsStoresEveryMessageOnce(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		ordered  bool
		maxBatch int
	}{
		{name: "one message per batch", maxBatch: 1},
		{name: "three messages per batch", maxBatch: 3},
		{name: "ordered", ordered: true, maxBatch: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fb := &fakeBackend{}
			var be core.Backend = fb
			if tt.ordered {
				be = orderingFake{fb}
			}
			reg := txmq.NewRegistry()
			n := newTestNodeOn(t, be, &txmq.NodeOptions{Registry: reg})
			txmq.MustDeclareIn(reg, "q", txmq.QueueConfig[string]{Transactional: txmq.Never, Ordered: tt.ordered, MaxBatchMessages: tt.maxBatch})
			spec := engine.Of(n).Spec("q")
			total := 2*engine.FlushPartBatches*tt.maxBatch + 7 // three parts when cut
			keys := []string{""}
			if tt.ordered {
				keys = []string{"a", "b", "c"}
			}
			var ps []*core.Pending
			for i := range total {
				ps = append(ps, keyedPending(spec, keys[i%len(keys)], fmt.Sprintf("m%d", i), time.Time{}))
			}
			engine.Of(n).FlushPending(context.Background(), spec, ps)

			fb.Mu.Lock()
			defer fb.Mu.Unlock()
			seen := make(map[string]int, total)
			partial := 0
			lastOfKey := map[string]int{}
			for _, b := range fb.Published {
				key, list, _ := strings.Cut(bodies(t, b), ":")
				msgs := strings.Split(list, ",")
				if len(msgs) < tt.maxBatch {
					partial++
				}
				for _, m := range msgs {
					seen[m]++
					var i int
					if _, err := fmt.Sscanf(m, "m%d", &i); err != nil {
						t.Fatalf("message %q: %v", m, err)
					}
					if last, ok := lastOfKey[key]; tt.ordered && ok && i < last {
						t.Fatalf("key %s: m%d stored after m%d", key, i, last)
					}
					lastOfKey[key] = i
				}
			}
			if len(seen) != total {
				t.Fatalf("stored %d distinct messages, want %d", len(seen), total)
			}
			for m, c := range seen {
				if c != 1 {
					t.Fatalf("%s stored %d times", m, c)
				}
			}
			if partial > 3 {
				t.Fatalf("%d batches below MaxBatchMessages %d; want at most one per part (3)", partial, tt.maxBatch)
			}
		})
	}
}
