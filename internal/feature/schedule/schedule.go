// Package schedule is the schedules feature (Queue.Schedule): an engine.Looper that, at each
// tick of each declared schedule, claims the tick cluster-wide through a Claimer (the
// outbox's Ticks table) and publishes the tick's messages in the claim's transaction.
//
// Each node claims every instant of each schedule from its start (read in Start) on, in
// order; the Claimer makes the first claim of an instant the only one. A node that was
// stalled past instants (an overloaded machine, a long GC pause, a slow database, claims of
// other schedules that took longer than a period) claims them late when it runs again, so an
// instant is lost only if every node that started before it stopped before getting to it, or
// if the nodes got to it more than CatchUp late (then the schedule's Missed policy applies,
// as for ticks while every node was down).
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

// CatchUp is how late a running node still claims an instant of a schedule: a node stalled
// past instants (an overloaded machine, a long GC pause, a slow database) claims them late,
// oldest first, when it runs again; instants more than CatchUp behind its clock when it gets
// to them are missed, as ticks while every node was down are: SkipMissed skips them,
// RunMissedOnce claims the latest of them; either is logged. It is well under the claimer's
// retention of claimed ticks (a day for outbox.Ticks), so a late claim is still once.
const CatchUp = time.Minute

// Runner runs the schedules list returns, claiming their ticks through ticks.
type Runner struct {
	ticks Claimer
	list  func() []Schedule
	e     *engine.Engine
	start time.Time // the engine's Start (Prepare): the schedules' instants run from there
}

// New returns the runner of the schedules list returns (read again at every turn, so that
// schedules declared later run too); ticks nil: the schedules do not run on this node.
func New(ticks Claimer, list func() []Schedule) *Runner { return &Runner{ticks: ticks, list: list} }

// Attach implements engine.Attacher.
func (r *Runner) Attach(e *engine.Engine) { r.e = e }

// Prepare implements engine.Preparer: it reads the node's start, in Start itself, so that an
// instant after Start returned is this node's to claim however late its loop begins.
func (r *Runner) Prepare(context.Context) { r.start = r.e.Clock().Now() }

// Loop runs the schedules until ctx ends (engine.Looper): it claims every instant of each
// schedule from the node's start on (a schedule declared later: from the loop's turn before
// it was seen) through the Claimer, in order, and publishes the tick's messages if the claim
// is its own. An instant the node got to late (it was stalled) is claimed late, within
// CatchUp (see there). It reads the time from the engine's Clock and looks at it at least
// once a second. Without a Claimer it only warns, once, when schedules are declared.
func (r *Runner) Loop(ctx context.Context) {
	if r.ticks == nil {
		if len(r.list()) > 0 {
			r.e.Logger().Warn("txmq: schedules are declared but this node has no NodeOptions.Ticks (an app database, TXMQ_DATABASE_URL): it does not run them")
		}
		return
	}
	clock := r.e.Clock()
	next := map[string]time.Time{}
	start := r.start
	if start.IsZero() { // Start did not run Prepare (a runner driven by hand)
		start = clock.Now()
	}
	since := start // a schedule first seen at a turn runs from the turn before
	for ctx.Err() == nil {
		now := clock.Now()
		var wake time.Time
		for _, s := range r.list() {
			s := &s
			t, ok := next[s.Name]
			if !ok { // new: the first instant after its start (and a missed one, by policy)
				if s.RunMissed {
					r.runMissed(ctx, s, since)
				}
				t = s.Ticks.Next(since)
			}
			t = r.claimDue(ctx, s, t, now)
			next[s.Name] = t
			if !t.IsZero() && (wake.IsZero() || t.Before(wake)) {
				wake = t
			}
		}
		since = now
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

// claimDue claims the instants of s from t up to now, oldest first, and returns the first
// one after now (after the last one it got to, if ctx ended). Instants more than CatchUp
// before now are missed: skipped, or the latest of them claimed with RunMissed.
func (r *Runner) claimDue(ctx context.Context, s *Schedule, t, now time.Time) time.Time {
	if t.IsZero() || t.After(now) { // zero: the spec has no instant left
		return t
	}
	if cutoff := now.Add(-CatchUp); !t.After(cutoff) {
		latest := s.Ticks.Latest(t, cutoff)
		if latest.IsZero() {
			latest = t
		}
		if s.RunMissed {
			r.e.Logger().Warn("txmq: this node was stalled (or its clock jumped) more than CatchUp past ticks of a schedule: publishing the latest of them (RunMissedOnce)", "schedule", s.Name, "queue", s.Queue, "from", t, "to", latest, "catch_up", CatchUp)
			r.claimTick(ctx, s, latest)
		} else {
			r.e.Logger().Warn("txmq: this node was stalled (or its clock jumped) more than CatchUp past ticks of a schedule: skipped (SkipMissed); another node may have published them", "schedule", s.Name, "queue", s.Queue, "from", t, "to", latest, "catch_up", CatchUp)
		}
		t = s.Ticks.Next(latest)
	}
	for !t.IsZero() && !t.After(now) && ctx.Err() == nil {
		r.claimTick(ctx, s, t)
		t = s.Ticks.Next(t)
	}
	return t
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
