package txmq

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/txmq/txmq/core"
)

// Missed says what a schedule does with ticks that passed while no node of the app ran it.
type Missed int

const (
	// SkipMissed (the default) publishes only the ticks from the node's start on.
	SkipMissed Missed = iota
	// RunMissedOnce publishes the latest missed tick once at start (a daily report that was
	// due while the app was down is sent late rather than never), then goes on from now.
	// The missed ticks are those after the schedule's last claimed tick in the app database
	// (a schedule that never claimed one missed none): nodes that start together publish the
	// latest one once between them.
	RunMissedOnce
)

// ScheduleConfig configures a periodic publish on a queue (see Queue.Schedule).
type ScheduleConfig[T any] struct {
	// Cron says when it ticks: a cron expression of 5 fields (minute, hour, day of month,
	// month, day of week), or 6 with seconds first, or a descriptor: "@every 10s", "@hourly",
	// "@daily". Parsed by github.com/robfig/cron/v3 (without its TZ= prefix: set Location).
	// "@every D" ticks at the instants the Unix epoch + k·D (D in whole seconds, at least
	// 1 s), whatever the location. Required.
	Cron string
	// Location is the time zone Cron is read in (any *time.Location, time.FixedZone
	// included). It does not move "@every" ticks. Default UTC.
	Location *time.Location
	// Messages builds the messages of one tick. Default: one zero T.
	Messages func(tick time.Time) []T
	// Missed is the policy for ticks missed while every node was down. Default SkipMissed.
	Missed Missed
}

// TickClaimer makes each tick of a schedule publish once cluster-wide. The outbox's
// *outbox.Ticks implements it with a table of claimed ticks in the app database: the tick's
// claim and its messages commit in one transaction. txmq.Open sets NodeOptions.Ticks to
// Store.Ticks().
type TickClaimer interface {
	// ClaimTick runs publish and returns true if no node claimed tick of schedule before; it
	// returns false, without running publish, if one did. publish's ctx must carry the
	// claim's transaction (core.ContextWithTx): the tick's messages are staged in it whatever
	// the queue's routing, so they commit with the claim or not at all. next is the
	// schedule's next tick after this one, for operators.
	ClaimTick(ctx context.Context, schedule, queue string, tick, next time.Time, publish func(ctx context.Context) error) (bool, error)
	// LastTick returns the latest claimed tick of schedule, zero if none.
	LastTick(ctx context.Context, schedule string) (time.Time, error)
}

// scheduleSpec is a declared schedule.
type scheduleSpec struct {
	name    string
	site    string // where it was declared: declaring again from there is not a second schedule
	queue   string
	sched   cron.Schedule
	missed  Missed
	publish func(ctx context.Context, n *Node, tick time.Time) error
}

// Schedule declares a periodic publish on q, named name (1-64 characters of a-z, 0-9, '_' and
// '-', unique in q's registry): at each tick of cfg.Cron, the messages cfg.Messages builds are
// published to q once cluster-wide, however many nodes run and whichever restart, with the
// message ids "<name>@<tick in Unix seconds>" (and "#<i>" for the i-th message from the
// second on). Every node whose NodeOptions.Ticks is set (txmq.Open sets it when the app has a
// database) runs the schedule; the app database decides which node publishes a tick. A node
// without Ticks logs that it does not run schedules.
//
// Ticks are fixed instants, the same on every node whatever its start time and however often
// it restarts: a cron expression names them in cfg.Location, and "@every D" is anchored at the
// Unix epoch (its ticks are epoch + k·D, so "@every 7s" ticks at the Unix seconds divisible by
// 7 and "@every 1h" on the hour in UTC). Nodes read the time from NodeOptions.Clock.
//
// A tick's claim and its messages commit in one transaction of the app database (the
// claimer's, see TickClaimer), whatever the queue's Transactional setting: on a Require or Try
// queue, as on a Never queue, the tick's messages are outbox rows of that transaction, which
// the outbox's after-commit publisher, relay or recovery sweep publishes. A node that dies
// right after claiming a tick therefore never loses it. (A Never queue's plain publishes keep
// their routing; only its ticks go through the outbox.) Schedules on an Ordered queue are
// refused: a tick has no ordering key.
func (q *Queue[T]) Schedule(name string, cfg ScheduleConfig[T]) error {
	if err := ValidateQueueName(name); err != nil {
		return fmt.Errorf("%w: schedule name: %w", core.ErrInvalidConfig, err)
	}
	if q.spec.ordered {
		return fmt.Errorf("%w: schedule %q: queue %q is Ordered and a schedule publishes without an ordering key; schedule an unordered queue whose listener publishes to the ordered one with txmq.Key", core.ErrInvalidConfig, name, q.spec.name)
	}
	loc := cfg.Location
	if loc == nil {
		loc = time.UTC
	}
	if cfg.Cron == "" {
		return fmt.Errorf("%w: schedule %q of queue %q: Cron is required (e.g. \"*/5 * * * *\" or \"@every 10s\")", core.ErrInvalidConfig, name, q.spec.name)
	}
	sched, err := parseSchedule(cfg.Cron, loc)
	if err != nil {
		return fmt.Errorf("%w: schedule %q of queue %q: Cron %q: %w", core.ErrInvalidConfig, name, q.spec.name, cfg.Cron, err)
	}
	if cfg.Missed != SkipMissed && cfg.Missed != RunMissedOnce {
		return fmt.Errorf("%w: schedule %q: Missed %d is not SkipMissed or RunMissedOnce", core.ErrInvalidConfig, name, cfg.Missed)
	}
	build := cfg.Messages
	if build == nil {
		build = func(time.Time) []T { var zero T; return []T{zero} }
	}
	spec := &scheduleSpec{name: name, queue: q.spec.name, sched: sched, missed: cfg.Missed,
		publish: func(ctx context.Context, n *Node, tick time.Time) error {
			msgs := build(tick)
			if len(msgs) == 0 {
				return nil
			}
			ids := make([]string, len(msgs))
			base := name + "@" + strconv.FormatInt(tick.Unix(), 10)
			for i := range ids {
				ids[i] = base
				if i > 0 {
					ids[i] = base + "#" + strconv.Itoa(i)
				}
			}
			return q.PublishMany(ctx, n, msgs, IDs(ids...), func(o *publishOptions) { o.tick = true })
		}}
	if _, file, line, ok := runtime.Caller(1); ok {
		spec.site = fmt.Sprintf("%s:%d", file, line)
	}
	reg := q.spec.reg
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.schedules == nil {
		reg.schedules = map[string]*scheduleSpec{}
	}
	if prev, dup := reg.schedules[name]; dup {
		if prev.site == spec.site && prev.queue == spec.queue {
			reg.schedules[name] = spec // the same declaration run again (a setup func called twice)
			return nil
		}
		return fmt.Errorf("%w: schedule %q is declared twice, at %s and at %s: declare each schedule once, or give each its own name", core.ErrInvalidConfig, name, prev.site, spec.site)
	}
	reg.schedules[name] = spec
	return nil
}

func (r *Registry) scheduleList() []*scheduleSpec {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*scheduleSpec, 0, len(r.schedules))
	for _, s := range r.schedules {
		out = append(out, s)
	}
	return out
}

// scheduleLoop runs the registry's schedules until the node stops: at each tick it claims
// the tick through opts.Ticks and publishes the tick's messages if the claim is its own. It
// reads the time from the node's Clock and looks at it at least once a second.
func (n *Node) scheduleLoop() {
	defer n.loops.Done()
	next := map[string]time.Time{}
	start := n.clock.Now()
	for n.stopCtx.Err() == nil {
		now := n.clock.Now()
		var wake time.Time
		for _, s := range n.reg.scheduleList() {
			t, ok := next[s.name]
			if !ok { // new: the first tick after the start (and a missed one, by policy)
				if s.missed == RunMissedOnce {
					n.runMissed(s, start)
				}
				t = s.sched.Next(start)
				next[s.name] = t
			}
			if !t.After(now) {
				n.claimTick(s, t)
				t = s.sched.Next(t)
				for !t.After(now) { // ticks missed while this node was stalled: skipped
					t = s.sched.Next(t)
				}
				next[s.name] = t
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
func (n *Node) claimTick(s *scheduleSpec, tick time.Time) {
	ctx, cancel := context.WithTimeout(n.stopCtx, 30*time.Second)
	defer cancel()
	claimed, err := n.opts.Ticks.ClaimTick(ctx, s.name, s.queue, tick, s.sched.Next(tick), func(ctx context.Context) error {
		return s.publish(ctx, n, tick)
	})
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		n.log.Error("txmq: publishing a scheduled tick failed; it is not retried (the next tick comes as planned)", "schedule", s.name, "queue", s.queue, "tick", tick, "error", err)
	case claimed:
		n.log.Debug("txmq: published a scheduled tick", "schedule", s.name, "queue", s.queue, "tick", tick)
	}
}

// runMissed publishes the latest tick of s after its last claimed tick and up to now, if any.
func (n *Node) runMissed(s *scheduleSpec, now time.Time) {
	ctx, cancel := context.WithTimeout(n.stopCtx, 10*time.Second)
	defer cancel()
	last, err := n.opts.Ticks.LastTick(ctx, s.name)
	if err != nil || last.IsZero() {
		return // never ran: nothing was missed
	}
	if missed := latestTick(s.sched, last, now); !missed.IsZero() {
		n.log.Info("txmq: publishing the latest tick missed while the app was down (RunMissedOnce)", "schedule", s.name, "tick", missed)
		n.claimTick(s, missed)
	}
}
