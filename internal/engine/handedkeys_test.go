package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// keyedHandoff is a handoffRecorder that answers core.KeyHolder with holds (or err).
type keyedHandoff struct {
	handoffRecorder
	holds bool
	err   error
	asked []string
}

func (h *keyedHandoff) HoldsKey(_ context.Context, queue, key string) (bool, error) {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	h.asked = append(h.asked, key)
	return h.holds, h.err
}

// TestLaterFlushFollowsOutbox: once a key's batch was handed to the outbox, the node's later
// flushes send that key's batches to the outbox too while the outbox holds the key (or cannot
// say), and to the backend again once it holds none; other keys are never asked about.
func TestLaterFlushFollowsOutbox(t *testing.T) {
	t.Parallel()
	fb := &fakeBackend{}
	down := true
	fb.PublishFn = func(_ context.Context, b core.OutgoingBatch) error {
		if down && b.Key == "a" {
			return fmt.Errorf("down: %w", core.ErrBackendUnavailable)
		}
		return nil
	}
	h := &keyedHandoff{holds: true}
	reg := txmq.NewRegistry()
	n := newTestNodeOn(t, orderingFake{fb}, &txmq.NodeOptions{Registry: reg, Handoff: h})
	txmq.MustDeclareIn(reg, "q", txmq.QueueConfig[string]{Transactional: txmq.Try, Ordered: true, MaxBatchMessages: 1})
	spec := engine.Of(n).Spec("q")
	flush := func(msgs ...string) {
		var ps []*core.Pending
		for _, m := range msgs {
			ps = append(ps, keyedPending(spec, m[:1], m, time.Time{}))
		}
		engine.Of(n).FlushPending(context.Background(), spec, ps)
	}
	flush("a1", "b1") // the outage: a1 handed off
	down = false
	flush("a2", "b2") // back, but the outbox holds a
	h.Mu.Lock()
	h.holds, h.err = false, errors.New("db down")
	h.Mu.Unlock()
	flush("a3") // the outbox cannot say: order first
	h.Mu.Lock()
	h.err = nil
	h.Mu.Unlock()
	flush("a4", "b3") // the outbox holds no a: straight to the backend
	flush("a5")       // forgotten: not asked again
	var handed, published []string
	h.Mu.Lock()
	for _, b := range h.Got {
		handed = append(handed, bodies(t, b))
	}
	asked := strings.Join(h.asked, ",")
	h.Mu.Unlock()
	fb.Mu.Lock()
	for _, b := range fb.Published {
		published = append(published, bodies(t, b))
	}
	fb.Mu.Unlock()
	if fmt.Sprint(handed) != "[a:a1 a:a2 a:a3]" {
		t.Errorf("handed off %v; want a1 (refused), a2 (outbox holds a), a3 (outbox cannot say)", handed)
	}
	// Batches of different keys in one flush are written by concurrent writers: only each
	// key's own order is fixed.
	perKey := map[string][]string{}
	for _, p := range published {
		perKey[p[:1]] = append(perKey[p[:1]], p)
	}
	if fmt.Sprint(perKey["a"]) != "[a:a4 a:a5]" || fmt.Sprint(perKey["b"]) != "[b:b1 b:b2 b:b3]" {
		t.Errorf("published %v; want a4 a5 for key a and b1 b2 b3 for key b, each in that order", published)
	}
	if asked != "a,a,a" {
		t.Errorf("the outbox was asked about keys %q; want a,a,a (a2, a3, a4; never b, nor a5 once a was gone)", asked)
	}
}
