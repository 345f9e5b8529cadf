package txmq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestDeclareValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		queue string
		cfg   QueueConfig[int]
		want  string // substring of the error; "" means valid
	}{
		{"valid", "emails", QueueConfig[int]{Transactional: Try}, ""},
		{"valid with dash and digits", "a-1_b", QueueConfig[int]{Transactional: Never}, ""},
		{"64 chars", "a" + strings.Repeat("b", 63), QueueConfig[int]{Transactional: Try}, ""},
		{"65 chars", "a" + strings.Repeat("b", 64), QueueConfig[int]{Transactional: Try}, "queue name"},
		{"uppercase", "Emails", QueueConfig[int]{Transactional: Try}, "queue name"},
		{"leading digit", "1q", QueueConfig[int]{Transactional: Try}, "queue name"},
		{"dot", "a.b", QueueConfig[int]{Transactional: Try}, "queue name"},
		{"empty", "", QueueConfig[int]{Transactional: Try}, "queue name"},
		{"no transactional", "q", QueueConfig[int]{}, "Transactional is required"},
		{"bad transactional", "q", QueueConfig[int]{Transactional: 9}, "not one of"},
		{"exclusive and cap", "q", QueueConfig[int]{Transactional: Try, Exclusive: true, MaxConcurrentBatches: Cap(2)}, "cannot be combined"},
		{"exclusive and cap func", "q", QueueConfig[int]{Transactional: Try, Exclusive: true, MaxConcurrentBatches: CapFunc(func() (int, error) { return 1, nil })}, "cannot be combined"},
		{"negative cap", "q", QueueConfig[int]{Transactional: Try, MaxConcurrentBatches: Cap(-1)}, "MaxConcurrentBatches"},
		{"negative batch", "q", QueueConfig[int]{Transactional: Try, MaxBatchMessages: -1}, "MaxBatchMessages"},
		{"negative attempts", "q", QueueConfig[int]{Transactional: Try, MaxAttempts: -3}, "MaxAttempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := DeclareIn(NewRegistry(), tt.queue, tt.cfg)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrInvalidConfig containing %q", err, tt.want)
			}
			if tt.queue != "" && !strings.Contains(err.Error(), tt.queue) {
				t.Fatalf("error %q does not name the queue %q", err, tt.queue)
			}
		})
	}
}

func declareAt(reg *Registry, name string, cfg QueueConfig[int]) (*Queue[int], error) {
	return DeclareIn(reg, name, cfg) // one source line for every call
}

func TestDeclareIdentity(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	a, err := declareAt(reg, "q", QueueConfig[int]{Transactional: Try})
	if err != nil {
		t.Fatal(err)
	}
	b, err := declareAt(reg, "q", QueueConfig[int]{Transactional: Try})
	if err != nil || a != b {
		t.Fatalf("same declaration again: got %p, %v; want the same queue %p", b, err, a)
	}
	_, err = declareAt(reg, "q", QueueConfig[int]{Transactional: Never})
	if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "different settings") {
		t.Fatalf("same place, other settings: got %v", err)
	}
	_, err = DeclareIn(reg, "q", QueueConfig[int]{Transactional: Try})
	if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "declared twice") || strings.Count(err.Error(), "registry_test.go:") != 2 {
		t.Fatalf("elsewhere: got %v; want an error naming both places", err)
	}
	// Another registry is independent.
	if _, err := DeclareIn(NewRegistry(), "q", QueueConfig[int]{Transactional: Never}); err != nil {
		t.Fatal(err)
	}
	if got := reg.Names(); len(got) != 1 || got[0] != "q" {
		t.Fatalf("Names() = %v", got)
	}
}

func TestDeclareDefaults(t *testing.T) {
	t.Parallel()
	q, err := DeclareIn(NewRegistry(), "q", QueueConfig[int]{Transactional: Try})
	if err != nil {
		t.Fatal(err)
	}
	if q.spec.MaxBatch != DefaultMaxBatchMessages || q.spec.MaxAttempts != DefaultMaxAttempts {
		t.Fatalf("defaults: maxBatch %d, maxAttempts %d", q.spec.MaxBatch, q.spec.MaxAttempts)
	}
	if q.Name() != "q" {
		t.Fatal(q.Name())
	}
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    Concurrency
		want int
	}{
		{"unset", Concurrency{}, core.Unlimited},
		{"fixed", Cap(3), 3},
		{"func", CapFunc(func() (int, error) { return 7, nil }), 7},
		{"func error", CapFunc(func() (int, error) { return 7, errors.New("x") }), core.Unlimited},
		{"func zero", CapFunc(func() (int, error) { return 0, nil }), core.Unlimited},
		{"func panic", CapFunc(func() (int, error) { panic("boom") }), core.Unlimited},
	}
	for _, tt := range tests {
		if got := tt.c.limit(); got != tt.want {
			t.Errorf("%s: limit() = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestListenRules(t *testing.T) {
	t.Parallel()
	n, _ := newTestNode(t, nil)
	q, err := DeclareIn(n.Registry(), "q", QueueConfig[int]{Transactional: Try})
	if err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context, []int) error { return nil }
	if err := q.Listen(n, fn); err != nil {
		t.Fatal(err)
	}
	if err := q.Listen(n, fn); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), `"q"`) {
		t.Fatalf("second listener: %v", err)
	}
	other, _ := DeclareIn(NewRegistry(), "other", QueueConfig[int]{Transactional: Try})
	if err := other.Listen(n, fn); !errors.Is(err, core.ErrNotDeclared) || !strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("undeclared queue: %v", err)
	}
	if err := q.Listen(n, nil); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("nil listener: %v", err)
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

func TestRateLimitBurstDefault(t *testing.T) {
	t.Parallel()
	q := MustDeclareIn(NewRegistry(), "rl", QueueConfig[int]{Transactional: Try, RateLimit: RateLimit{Batches: 10, Per: time.Second}})
	if q.spec.Rate.Burst != 10 {
		t.Fatalf("Burst defaults to %d, want Batches (10)", q.spec.Rate.Burst)
	}
}
