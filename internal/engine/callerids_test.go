package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/internal/engine"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
)

// TestDeduplicatedCounted: a node counts the repeats it leaves out, whether they met in one
// flush or the backend refused them, and stores each id once.
func TestDeduplicatedCounted(t *testing.T) {
	t.Parallel()
	be := memory.New(nil)
	defer be.Close()
	n := newTestNodeOn(t, be, &txmq.NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour})
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try, IDDedupWindow: time.Minute})
	ctx := context.Background()
	for _, id := range []string{"a", "b", "a"} { // one flush: the second a is left out there
		if err := q.Publish(ctx, n, 1, txmq.ID(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Publish(ctx, n, 2, txmq.After(time.Hour), txmq.ID("b")); err != nil { // another due time
		t.Fatal(err)
	}
	engine.Of(n).FlushAll(ctx)
	if err := q.PublishMany(ctx, n, []int{1, 2}, txmq.IDs("c", "a")); err != nil { // the backend refuses a
		t.Fatal(err)
	}
	engine.Of(n).FlushAll(ctx)
	st := n.Stats()
	if st.Deduplicated != 3 || st.PublishedMessages != 3 {
		t.Fatalf("Deduplicated %d, PublishedMessages %d; want 3 and 3 (a, b, c once each)", st.Deduplicated, st.PublishedMessages)
	}
}
