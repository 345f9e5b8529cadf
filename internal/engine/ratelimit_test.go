package engine

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestLocalLimiter(t *testing.T) {
	t.Parallel()
	var l localLimiter
	limit := core.RateLimit{Batches: 10, Per: time.Second, Burst: 10}
	ctx := context.Background()
	got, _, _ := l.Take(ctx, "q", 25, limit)
	if got != 10 {
		t.Fatalf("first Take(25) got %d, want the burst, 10", got)
	}
	got, wait, _ := l.Take(ctx, "q", 1, limit)
	if got != 0 || wait <= 0 || wait > 110*time.Millisecond {
		t.Fatalf("Take from an empty bucket: %d tokens, retry in %v; want 0 and about 100ms", got, wait)
	}
	_ = l.Return(ctx, "q", 3, limit)
	if got, _, _ := l.Take(ctx, "q", 5, limit); got != 3 {
		t.Fatalf("Take after returning 3: %d, want 3", got)
	}
	if got, _, _ := l.Take(ctx, "other", 2, limit); got != 2 {
		t.Fatalf("another queue's bucket: %d, want 2", got)
	}
	time.Sleep(220 * time.Millisecond)
	if got, _, _ := l.Take(ctx, "q", 5, limit); got < 2 || got > 3 {
		t.Fatalf("Take after 220ms at 10/s: %d, want 2", got)
	}
}
