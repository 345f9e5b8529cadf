package engine

import (
	"context"
	"errors"
	"time"
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

// scheduleLoop runs the registry's schedules until the node stops: at each tick it claims
// the tick through opts.Ticks and publishes the tick's messages if the claim is its own. It
// reads the time from the node's Clock and looks at it at least once a second.
func (n *Engine) scheduleLoop() {
	defer n.loops.Done()
	next := map[string]time.Time{}
	start := n.clock.Now()
	for n.stopCtx.Err() == nil {
		now := n.clock.Now()
		var wake time.Time
		for _, s := range n.opts.Schedules() {
			s := &s
			t, ok := next[s.Name]
			if !ok { // new: the first tick after the start (and a missed one, by policy)
				if s.RunMissed {
					n.runMissed(s, start)
				}
				t = s.Ticks.Next(start)
				next[s.Name] = t
			}
			if !t.After(now) {
				n.claimTick(s, t)
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
			d = max(wake.Sub(n.clock.Now()), 0)
		}
		timer := time.NewTimer(min(d, time.Second)) // new schedules (and a clock that jumps) are seen within a second
		select {
		case <-n.stopCtx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// claimTick publishes tick of s if no node did.
func (n *Engine) claimTick(s *Schedule, tick time.Time) {
	ctx, cancel := context.WithTimeout(n.stopCtx, 30*time.Second)
	defer cancel()
	claimed, err := n.opts.Ticks.ClaimTick(ctx, s.Name, s.Queue, tick, s.Ticks.Next(tick), func(ctx context.Context) error {
		return s.Publish(ctx, tick)
	})
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		n.log.Error("txmq: publishing a scheduled tick failed; it is not retried (the next tick comes as planned)", "schedule", s.Name, "queue", s.Queue, "tick", tick, "error", err)
	case claimed:
		n.log.Debug("txmq: published a scheduled tick", "schedule", s.Name, "queue", s.Queue, "tick", tick)
	}
}

// runMissed publishes the latest tick of s after its last claimed tick and up to now, if any.
func (n *Engine) runMissed(s *Schedule, now time.Time) {
	ctx, cancel := context.WithTimeout(n.stopCtx, 10*time.Second)
	defer cancel()
	last, err := n.opts.Ticks.LastTick(ctx, s.Name)
	if err != nil || last.IsZero() {
		return // never ran: nothing was missed
	}
	if missed := s.Ticks.Latest(last, now); !missed.IsZero() {
		n.log.Info("txmq: publishing the latest tick missed while the app was down (RunMissedOnce)", "schedule", s.Name, "tick", missed)
		n.claimTick(s, missed)
	}
}
