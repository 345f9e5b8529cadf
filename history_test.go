package txmq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/memory"
)

func TestNodeRunHistoryAndInfo(t *testing.T) {
	t.Parallel()
	be := memory.New(nil)
	t.Cleanup(func() { _ = be.Close() })
	n := newTestNodeOn(t, be, &NodeOptions{Backoff: func(int) time.Duration { return time.Millisecond }, PollWait: 50 * time.Millisecond, FlushWindow: time.Millisecond})
	q := MustDeclareIn(n.Registry(), "hist", QueueConfig[int]{Transactional: Try, MaxConcurrentBatches: Cap(3), MaxAttempts: 2})
	fail := true
	done := make(chan struct{}, 4)
	if err := q.Listen(n, func(context.Context, []int) error {
		defer func() { done <- struct{}{} }()
		if fail {
			fail = false
			return errors.New("once")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(context.Background(), n, 1); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("not run twice")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	var last MinuteRuns
	for time.Now().Before(deadline) {
		h := n.RunHistory("hist")
		last = h[len(h)-1]
		if len(h) > 1 {
			last.Batches += h[len(h)-2].Batches // the runs may straddle a minute
			last.Failed += h[len(h)-2].Failed
		}
		if last.Batches == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if last.Batches != 2 || last.Failed != 1 {
		t.Fatalf("history: %+v; want 2 runs, 1 failed", last)
	}
	if n.RunHistory("nope") != nil {
		t.Fatal("history of a queue the node does not listen to")
	}
	info, ok := n.Registry().Info("hist")
	if !ok || info.Transactional != Try || info.MaxConcurrentBatches != "3" || info.MaxAttempts != 2 || info.MaxBatchMessages != DefaultMaxBatchMessages || info.DeclaredAt == "" {
		t.Fatalf("Info = %+v, %v", info, ok)
	}
}
