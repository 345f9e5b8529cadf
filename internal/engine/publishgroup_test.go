package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// groupingBackend is a fake backend that stores concurrent plain publishes together
// (core.PublishGrouper) in groups of up to group, bodies of up to 1 KiB.
type groupingBackend struct {
	*fakeBackend
	group int
}

func (g groupingBackend) PublishGroup() (int, int) { return g.group, 1 << 10 }

// TestFlushWritersFollowPublishGroup: a flush writes as many plain batches at a time as the
// backend groups (here 32), not the default 8, and every batch is stored; batches the backend
// does not group (here bodies over its 1 KiB) are still written by 8 at most.
func TestFlushWritersFollowPublishGroup(t *testing.T) {
	t.Parallel()
	const group = 32
	for _, tc := range []struct {
		name string
		body int
		want int
	}{{"plain", 10, group}, {"large", 2 << 10, engine.FlushConcurrency}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if top := flushWriters(t, group, tc.body, tc.want); top != tc.want {
				t.Fatalf("at most %d writes in flight; want %d", top, tc.want)
			}
		})
	}
}

// flushWriters publishes 200 one-message batches of about body bytes on a node whose backend
// groups up to group publishes, each write waiting until want writes were in flight once, and
// returns the most writes that were in flight at a time.
func flushWriters(t *testing.T, group, body, want int) int {
	const total = 200
	fb := &fakeBackend{}
	var (
		mu            sync.Mutex
		inFlight, top int
		full          = make(chan struct{})
		fullOnce      sync.Once
	)
	fb.PublishFn = func(ctx context.Context, _ core.OutgoingBatch) error {
		mu.Lock()
		inFlight++
		top = max(top, inFlight)
		reached := inFlight == want
		mu.Unlock()
		if reached {
			fullOnce.Do(func() { close(full) })
		}
		select {
		case <-full:
		case <-ctx.Done():
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		return ctx.Err()
	}
	n := newTestNodeOn(t, groupingBackend{fakeBackend: fb, group: group}, nil)
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[string]{Transactional: txmq.Try, MaxBatchMessages: 1})
	msgs := make([]string, total)
	for i := range msgs {
		msgs[i] = strings.Repeat("x", body)
	}
	if err := q.PublishMany(context.Background(), n, msgs); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := n.Stats().PublishedBatches; got != total {
		t.Fatalf("%d of %d batches stored (handed off %d, dropped %v)", got, total, n.Stats().HandedOff, n.Stats().Dropped)
	}
	mu.Lock()
	defer mu.Unlock()
	return top
}
