package txmq

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestScheduleValidation(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	q := MustDeclareIn(reg, "sched", QueueConfig[int]{Transactional: Try})
	tests := []struct {
		name, sched, cron string
		want              string
	}{
		{"no cron", "a", "", "Cron is required"},
		{"bad cron", "b", "every minute", "Cron \"every minute\""},
		{"bad name", "B!", "@hourly", "schedule name"},
		{"ok", "c", "*/5 * * * *", ""},
		{"seconds", "d", "*/10 * * * * *", ""},
	}
	declareC := func() error { return q.Schedule("same-site", ScheduleConfig[int]{Cron: "@hourly"}) }
	for range 2 {
		if err := declareC(); err != nil {
			t.Fatalf("declaring a schedule again from the same place: %v", err)
		}
	}
	for _, tt := range tests {
		err := q.Schedule(tt.sched, ScheduleConfig[int]{Cron: tt.cron})
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want ErrInvalidConfig mentioning %q", tt.name, err, tt.want)
		}
	}
	if err := q.Schedule("c", ScheduleConfig[int]{Cron: "@daily"}); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "declared twice, at ") {
		t.Errorf("a second schedule named c from another place: %v; want an error naming both places", err)
	}
}

// fakeTicks is a TickClaimer in memory.
type fakeTicks struct {
	mu      sync.Mutex
	last    time.Time
	claimed []time.Time
}

func (f *fakeTicks) ClaimTick(ctx context.Context, _, _ string, tick, _ time.Time, publish func(context.Context) error) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.claimed {
		if c.Equal(tick) {
			return false, nil
		}
	}
	f.claimed = append(f.claimed, tick)
	return true, publish(ctx)
}

func (f *fakeTicks) LastTick(context.Context, string) (time.Time, error) { return f.last, nil }

// TestRunMissedOnce: a schedule whose last tick was 10 minutes ago publishes the latest missed
// tick once at start, then ticks on.
func TestRunMissedOnce(t *testing.T) {
	t.Parallel()
	ticks := &fakeTicks{last: time.Now().Add(-10 * time.Minute).Truncate(time.Minute)}
	n, fb := newTestNode(t, &NodeOptions{Ticks: ticks, FlushWindow: time.Millisecond})
	q := MustDeclareIn(n.Registry(), "missed", QueueConfig[int]{Transactional: Try})
	if err := q.Schedule("every-minute", ScheduleConfig[int]{Cron: "* * * * *", Missed: RunMissedOnce}); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(fb.Batches()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ticks.mu.Lock()
	defer ticks.mu.Unlock()
	want := time.Now().Truncate(time.Minute)
	if len(ticks.claimed) != 1 || !ticks.claimed[0].Equal(want) && !ticks.claimed[0].Equal(want.Add(-time.Minute)) {
		t.Fatalf("claimed %v at start; want the latest missed minute (%v) once", ticks.claimed, want)
	}
	if got := len(fb.Batches()); got != 1 {
		t.Fatalf("%d batches published, want the missed tick's one", got)
	}
}

// TestScheduleInfo: a registry describes its declared schedules (spec, missed policy, queue,
// where declared) for operator tools, and knows no undeclared one.
func TestScheduleInfo(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	q := MustDeclareIn(reg, "info-reports", QueueConfig[string]{Transactional: Try})
	if err := q.Schedule("info-nightly", ScheduleConfig[string]{Cron: "0 3 * * *", Missed: RunMissedOnce}); err != nil {
		t.Fatal(err)
	}
	info, ok := reg.ScheduleInfo("info-nightly")
	if !ok || info.Name != "info-nightly" || info.Queue != "info-reports" || info.Cron != "0 3 * * *" || info.Missed != RunMissedOnce || !strings.Contains(info.DeclaredAt, "schedule_test.go") {
		t.Fatalf("ScheduleInfo = %+v, %v", info, ok)
	}
	if info.Missed.String() != "RunMissedOnce" || SkipMissed.String() != "SkipMissed" {
		t.Fatalf("Missed names: %q, %q", info.Missed, SkipMissed)
	}
	if _, ok := reg.ScheduleInfo("nosuch"); ok {
		t.Fatal("ScheduleInfo of an undeclared schedule: ok")
	}
}
