package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// groupingBackend is a fake backend that stores concurrent publishes together
// (core.PublishGrouper) in groups of up to group.
type groupingBackend struct {
	*fakeBackend
	group int
}

func (g groupingBackend) PublishGroup() int { return g.group }

// TestFlushWritersFollowPublishGroup: a flush writes as many batches at a time as the backend
// groups (here 32), not the default 8, and every batch is stored.
func TestFlushWritersFollowPublishGroup(t *testing.T) {
	t.Parallel()
	const group, total = 32, 200
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
		reached := inFlight == group
		mu.Unlock()
		if reached {
			fullOnce.Do(func() { close(full) })
		}
		select { // each write waits until the group's worth of writes is in flight once
		case <-full:
		case <-ctx.Done():
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		return ctx.Err()
	}
	n := newTestNodeOn(t, groupingBackend{fakeBackend: fb, group: group}, nil)
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxBatchMessages: 1})
	msgs := make([]int, total)
	if err := q.PublishMany(context.Background(), n, msgs); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := n.Stats().PublishedBatches; got != total {
		t.Fatalf("%d of %d batches stored (handed off %d, dropped %v)", got, total, n.Stats().HandedOff, n.Stats().Dropped)
	}
	if top != group || group <= engine.FlushConcurrency {
		t.Fatalf("at most %d writes in flight; want the backend's group of %d", top, group)
	}
}
