package schedule_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/feature/schedule"
	"github.com/txmq/txmq/txmqtest"
)

// testClock is an engine clock the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// claims is a Claimer that records the ticks it is asked to claim (each claim its own).
type claims struct {
	mu    sync.Mutex
	ticks []int64
}

func (c *claims) ClaimTick(ctx context.Context, _, _ string, tick, _ time.Time, publish func(ctx context.Context) error) (bool, error) {
	if err := publish(ctx); err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ticks = append(c.ticks, tick.Unix())
	return true, nil
}

func (c *claims) LastTick(context.Context, string) (time.Time, error) { return time.Time{}, nil }

func (c *claims) got() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ticks)
}

// noSpecs declares no queue.
type noSpecs struct{}

func (noSpecs) Lookup(string) *engine.Spec { return nil }
func (noSpecs) Names() []string            { return nil }

// evens returns the even Unix seconds in [from, to].
func evens(from, to int64) []int64 {
	var out []int64
	for t := from; t <= to; t += 2 {
		out = append(out, t)
	}
	return out
}

// TestLoopClaimsInstantsItWasStalledPast: a node whose loop gets to the instants of an
// "@every 2s" schedule late (its clock moved on while it did not run) claims every instant
// from its start on, late and in order, when they are at most CatchUp old; the older ones are
// missed: SkipMissed skips them, RunMissedOnce claims the latest of them first.
func TestLoopClaimsInstantsItWasStalledPast(t *testing.T) {
	t.Parallel()
	const t0 = 1_000_000_000 // the node starts half a second after it
	catchUp := int64(schedule.CatchUp / time.Second)
	for _, c := range []struct {
		name      string
		runMissed bool
		stall     int64 // seconds the clock moves on while the node does not run
		want      []int64
	}{
		{"stalled 10 s: every instant, late", false, 10, evens(t0+2, t0+10)},
		{"stalled 10 s, RunMissedOnce: the same", true, 10, evens(t0+2, t0+10)},
		{"stalled past CatchUp, SkipMissed: the older instants skipped", false, 300, evens(t0+300-catchUp+2, t0+300)},
		{"stalled past CatchUp, RunMissedOnce: the latest older one claimed", true, 300, evens(t0+300-catchUp, t0+300)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ticks, err := schedule.Parse("@every 2s", time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			clk := &testClock{t: time.Unix(t0, int64(500*time.Millisecond))}
			cl := &claims{}
			sched := schedule.Schedule{Name: "s", Queue: "q", Ticks: ticks, RunMissed: c.runMissed,
				Publish: func(context.Context, time.Time) error { return nil }}
			r := schedule.New(cl, func() []schedule.Schedule { return []schedule.Schedule{sched} })
			be := memory.New(nil)
			t.Cleanup(func() { _ = be.Close() })
			e, err := engine.New(be, engine.Options{Specs: noSpecs{}, Features: []any{r}, Clock: clk,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close(context.Background()) })
			clk.set(time.Unix(t0+c.stall, int64(500*time.Millisecond)))
			last := c.want[len(c.want)-1]
			txmqtest.Eventually(t, 20*time.Second, func() bool { return slices.Contains(cl.got(), last) }, func() string {
				return fmt.Sprintf("the node claimed tick %d; claimed %v", last, cl.got())
			})
			if got := cl.got(); !slices.Equal(got, c.want) {
				t.Errorf("claimed %v, want %v", got, c.want)
			}
		})
	}
}
