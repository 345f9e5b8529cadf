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

// orderingFake is the fake backend with the per-key ordering capability.
type orderingFake struct{ *fakeBackend }

func (orderingFake) OrdersKeys() error { return nil }

// TestFlushOrderedHandoff: a flush writes a key's batches one after the other; once one is
// handed to the outbox, the later ones of its key follow it there, while other keys go on.
func TestFlushOrderedHandoff(t *testing.T) {
	t.Parallel()
	fb := &fakeBackend{}
	fb.PublishFn = func(_ context.Context, b core.OutgoingBatch) error {
		if b.Key == "a" && strings.Contains(string(b.Body), `"a1"`) {
			return fmt.Errorf("down: %w", core.ErrBackendUnavailable)
		}
		return nil
	}
	h := &handoffRecorder{}
	reg := txmq.NewRegistry()
	n := newTestNodeOn(t, orderingFake{fb}, &txmq.NodeOptions{Registry: reg, Handoff: h})
	txmq.MustDeclareIn(reg, "q", txmq.QueueConfig[string]{Transactional: txmq.Try, Ordered: true, MaxBatchMessages: 1})
	spec := engine.Of(n).Spec("q")
	var ps []*core.Pending
	for i := 1; i <= 3; i++ {
		ps = append(ps, keyedPending(spec, "a", fmt.Sprintf("a%d", i), time.Time{}), keyedPending(spec, "b", fmt.Sprintf("b%d", i), time.Time{}))
	}
	engine.Of(n).FlushPending(context.Background(), spec, ps)
	var handed, published []string
	h.Mu.Lock()
	defer h.Mu.Unlock()
	for _, b := range h.Got {
		handed = append(handed, bodies(t, b))
	}
	fb.Mu.Lock()
	for _, b := range fb.Published {
		published = append(published, bodies(t, b))
	}
	fb.Mu.Unlock()
	if fmt.Sprint(handed) != "[a:a1 a:a2 a:a3]" {
		t.Fatalf("handed off %v; want key a's batches in order", handed)
	}
	if fmt.Sprint(published) != "[b:b1 b:b2 b:b3]" {
		t.Fatalf("published %v; want key b's batches in order", published)
	}
}
