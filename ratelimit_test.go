package txmq

import (
	"context"
	"testing"
	"time"
)

func TestLocalLimiter(t *testing.T) {
	t.Parallel()
	var l localLimiter
	limit := rateDefaults(RateLimit{Batches: 10, Per: time.Second})
	if limit.Burst != 10 {
		t.Fatalf("Burst defaults to %d, want Batches (10)", limit.Burst)
	}
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

func TestRateLimitValidation(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	for _, bad := range []RateLimit{{Batches: 5}, {Per: time.Second}, {Batches: -1, Per: time.Second}, {Batches: 1, Per: time.Second, Burst: -1}} {
		if _, err := DeclareIn(reg, "rl", QueueConfig[int]{Transactional: Try, RateLimit: bad}); err == nil {
			t.Errorf("RateLimit %+v accepted", bad)
		}
	}
}
