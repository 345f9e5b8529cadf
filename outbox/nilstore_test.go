package outbox

import (
	"context"
	"errors"
	"strings"
	"testing"

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
