package outbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// TestNilStore: an app without a database has a nil *Store (txmq.Open without
// TXMQ_DATABASE_URL); its methods return ErrNoDatabase, naming the setting, instead of
// dereferencing nil.
func TestNilStore(t *testing.T) {
	t.Parallel()
	var s *Store
	ctx := context.Background()
	calls := map[string]error{
		"RunInTx":   s.RunInTx(ctx, func(context.Context, pgx.Tx) error { return nil }),
		"Savepoint": s.Savepoint(ctx, func(context.Context, pgx.Tx) error { return nil }),
		"Start":     s.Start(ctx),
		"Handoff":   s.Handoff(ctx, nil),
		"Replay":    s.Replay(ctx, 1),
	}
	_, calls["ListDeadLetters"] = s.ListDeadLetters(ctx, DLQFilter{})
	_, calls["ListOutbox"] = s.ListOutbox(ctx, OutboxFilter{})
	_, calls["SweepOnce"] = s.SweepOnce(ctx)
	for name, err := range calls {
		if !errors.Is(err, ErrNoDatabase) || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "TXMQ_DATABASE_URL") {
			t.Errorf("%s on a nil Store: %v; want ErrNoDatabase naming TXMQ_DATABASE_URL", name, err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Errorf("Close on a nil Store: %v", err)
	}
	if err := s.WaitIdle(ctx); err != nil {
		t.Errorf("WaitIdle on a nil Store: %v", err)
	}
	if got := s.WithTx(ctx, nil); got != ctx {
		t.Errorf("WithTx on a nil Store changed the context")
	}
}

// TestNilStoreJobs: a nil Store hands out nil Pauses, Ticks, Limits and Nodes (txmq.Open gives them
// to the node only with a database), whose methods return ErrNoDatabase too.
func TestNilStoreJobs(t *testing.T) {
	t.Parallel()
	var s *Store
	if s.Pauses() != nil || s.Ticks() != nil || s.Limits() != nil || s.Nodes() != nil {
		t.Fatal("a nil Store handed out a non-nil Pauses, Ticks, Limits or Nodes")
	}
	ctx := context.Background()
	calls := map[string]error{
		"Pauses().Pause":  s.Pauses().Pause(ctx, "q", "test"),
		"Pauses().Resume": s.Pauses().Resume(ctx, "q"),
		"Limits().Return": s.Limits().Return(ctx, "q", 1, core.RateLimit{Batches: 1, Per: time.Second, Burst: 1}),
		"Nodes().Beat":    s.Nodes().Beat(ctx, core.NodeBeat{Node: "n"}),
	}
	_, _, calls["Nodes().List"] = s.Nodes().List(ctx)
	_, calls["Pauses().PausedQueues"] = s.Pauses().PausedQueues(ctx)
	_, calls["Pauses().Paused"] = s.Pauses().Paused(ctx)
	_, calls["Ticks().ClaimTick"] = s.Ticks().ClaimTick(ctx, "s", "q", time.Now(), time.Time{}, func(context.Context) error { return nil })
	_, calls["Ticks().LastTick"] = s.Ticks().LastTick(ctx, "s")
	_, calls["Ticks().Schedules"] = s.Ticks().Schedules(ctx)
	_, _, calls["Limits().Take"] = s.Limits().Take(ctx, "q", 1, core.RateLimit{Batches: 1, Per: time.Second, Burst: 1})
	for name, err := range calls {
		if !errors.Is(err, ErrNoDatabase) || !strings.Contains(err.Error(), "Store."+name) {
			t.Errorf("%s on a nil Store: %v; want ErrNoDatabase naming Store.%s", name, err, name)
		}
	}
}
