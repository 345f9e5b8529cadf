package txmq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	b := ExponentialBackoff(time.Second, 10*time.Second)
	for _, tc := range []struct {
		run  int
		base time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second}, {5, 10 * time.Second}, {50, 10 * time.Second}} {
		for range 200 {
			d := b(tc.run)
			if d < tc.base*4/5 || d > tc.base*6/5 {
				t.Fatalf("run %d: %v outside ±20%% of %v", tc.run, d, tc.base)
			}
		}
	}
	if d := DefaultBackoff(100); d > 12*time.Minute {
		t.Fatalf("default backoff unbounded: %v", d)
	}
}

func TestLeaseMargin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ lease, want time.Duration }{
		{100 * time.Millisecond, 25 * time.Millisecond}, // lease/4: the fence stays 75 ms after the claim
		{time.Second, 250 * time.Millisecond},
		{2 * time.Second, 500 * time.Millisecond},
		{4 * time.Second, time.Second},
		{30 * time.Second, 3 * time.Second},
		{5 * time.Minute, 30 * time.Second},
	} {
		if got := core.LeaseMargin(tc.lease); got != tc.want {
			t.Errorf("LeaseMargin(%v) = %v, want %v", tc.lease, got, tc.want)
		}
		if tc.lease-core.LeaseMargin(tc.lease) <= 0 {
			t.Errorf("lease %v leaves no time before its fence", tc.lease)
		}
	}
}

func TestPublishErrors(t *testing.T) {
	t.Parallel()
	n, _ := newTestNode(t, nil)
	ctx := context.Background()
	q := MustDeclareIn(n.Registry(), "q", QueueConfig[int]{Transactional: Try})
	other := MustDeclareIn(NewRegistry(), "other", QueueConfig[int]{Transactional: Try})
	if err := other.Publish(ctx, n, 1); !errors.Is(err, core.ErrNotDeclared) {
		t.Fatalf("foreign registry: %v", err)
	}
	if err := q.Publish(ctx, nil, 1); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("nil node: %v", err)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(ctx, n, 1); !errors.Is(err, core.ErrClosed) || !strings.Contains(err.Error(), `"q"`) {
		t.Fatalf("after close: %v", err)
	}
}
