// Package schedule is the schedules feature (Queue.Schedule): an engine.Looper that, at each
// tick of each declared schedule, claims the tick cluster-wide through a Claimer (the
// outbox's Ticks table) and publishes the tick's messages in the claim's transaction.
package schedule

import (
	"context"
	"errors"
	"time"

	"github.com/txmq/txmq/internal/engine"
)

// Schedule is a declared schedule, bound to the node that runs it.
type Schedule struct {
	// Name and Queue name the schedule and its queue.
	Name, Queue string
	// Ticks says when it ticks.
	Ticks Ticks
	// RunMissed publishes the latest tick missed while no node ran (txmq.RunMissedOnce).
	RunMissed bool
	// Publish publishes the messages of tick, staged in ctx's transaction (the claim's).
	Publish func(ctx context.Context, tick time.Time) error
}

// Ticks are a schedule's instants.
type Ticks interface {
	// Next returns the first tick strictly after t.
	Next(t time.Time) time.Time
	// Latest returns the latest tick strictly after after and at most upTo, zero if none.
	Latest(after, upTo time.Time) time.Time
}

// Claimer makes each tick of a schedule publish once cluster-wide (txmq.TickClaimer).
type Claimer interface {
	// ClaimTick runs publish and returns true if no node claimed tick of schedule before.
	ClaimTick(ctx context.Context, schedule, queue string, tick, next time.Time, publish func(ctx context.Context) error) (bool, error)
	// LastTick returns the latest claimed tick of schedule, zero if none.
	LastTick(ctx context.Context, schedule string) (time.Time, error)
}

// Runner runs the schedules list returns, claiming their ticks through ticks.
type Runner struct {
	ticks Claimer
	list  func() []Schedule
	e     *engine.Engine
}

// New returns the runner of the schedules list returns (read again at every turn, so that
// schedules declared later run too); ticks nil: the schedules do not run on this node.
func New(ticks Claimer, list func() []Schedule) *Runner { return &Runner{ticks: ticks, list: list} }

// Attach implements engine.Attacher.
func (r *Runner) Attach(e *engine.Engine) { r.e = e }

// Loop runs the schedules until ctx ends (engine.Looper): at each tick it claims the tick
// through the Claimer and publishes the tick's messages if the claim is its own. It reads
// the time from the engine's Clock and looks at it at least once a second. Without a
// Claimer it only warns, once, when schedules are declared.
func (r *Runner) Loop(ctx context.Context) {
	if r.ticks == nil {
		if len(r.list()) > 0 {
			r.e.Logger().Warn("txmq: schedules are declared but this node has no NodeOptions.Ticks (an app database, TXMQ_DATABASE_URL): it does not run them")
		}
		return
	}
	clock := r.e.Clock()
	next := map[string]time.Time{}
	start := clock.Now()
	for ctx.Err() == nil {
		now := clock.Now()
		var wake time.Time
		for _, s := range r.list() {
			s := &s
			t, ok := next[s.Name]
			if !ok { // new: the first tick after the start (and a missed one, by policy)
				if s.RunMissed {
					r.runMissed(ctx, s, start)
				}
				t = s.Ticks.Next(start)
				next[s.Name] = t
			}
			if !t.After(now) {
				r.claimTick(ctx, s, t)
				t = s.Ticks.Next(t)
				for !t.After(now) { // ticks missed while this node was stalled: skipped
					t = s.Ticks.Next(t)
				}
				next[s.Name] = t
			}
			if wake.IsZero() || t.Before(wake) {
				wake = t
			}
		}
		d := time.Second
		if !wake.IsZero() {
			d = max(wake.Sub(clock.Now()), 0)
		}
		timer := time.NewTimer(min(d, time.Second)) // new schedules (and a clock that jumps) are seen within a second
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// claimTick publishes tick of s if no node did.
func (r *Runner) claimTick(stop context.Context, s *Schedule, tick time.Time) {
	ctx, cancel := context.WithTimeout(stop, 30*time.Second)
	defer cancel()
	claimed, err := r.ticks.ClaimTick(ctx, s.Name, s.Queue, tick, s.Ticks.Next(tick), func(ctx context.Context) error {
		return s.Publish(ctx, tick)
	})
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		r.e.Logger().Error("txmq: publishing a scheduled tick failed; it is not retried (the next tick comes as planned)", "schedule", s.Name, "queue", s.Queue, "tick", tick, "error", err)
	case claimed:
		r.e.Logger().Debug("txmq: published a scheduled tick", "schedule", s.Name, "queue", s.Queue, "tick", tick)
	}
}

// runMissed publishes the latest tick of s after its last claimed tick and up to now, if any.
func (r *Runner) runMissed(stop context.Context, s *Schedule, now time.Time) {
	ctx, cancel := context.WithTimeout(stop, 10*time.Second)
	defer cancel()
	last, err := r.ticks.LastTick(ctx, s.Name)
	if err != nil || last.IsZero() {
		return // never ran: nothing was missed
	}
	if missed := s.Ticks.Latest(last, now); !missed.IsZero() {
		r.e.Logger().Info("txmq: publishing the latest tick missed while the app was down (RunMissedOnce)", "schedule", s.Name, "tick", missed)
		r.claimTick(ctx, s, missed)
	}
}
