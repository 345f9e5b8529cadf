package txmq

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/feature"
)

// Missed says what a schedule does with ticks that passed while no node of the app ran it,
// and with the ticks a running node got to more than a minute late (it was stalled, or its
// clock jumped): see Queue.Schedule.
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
	cron    string // ScheduleConfig.Cron, as declared
	ticks   feature.Ticks
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
// Each node claims every instant from its Start on, in order. A node stalled past instants
// (an overloaded machine, a long GC pause, a slow database) claims them late when it runs
// again, oldest first, however many periods it lost; instants it gets to more than a minute
// late (a longer stall, or a clock that jumped) are missed as ticks while every node was down
// are: skipped with SkipMissed, the latest of them claimed with RunMissedOnce, and logged.
// Another node that ran on time has claimed them anyway: an instant is lost only if every
// node that started before it stopped before getting to it, or got to it over a minute late.
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
	if q.spec.Ordered {
		return fmt.Errorf("%w: schedule %q: queue %q is Ordered and a schedule publishes without an ordering key; schedule an unordered queue whose listener publishes to the ordered one with txmq.Key", core.ErrInvalidConfig, name, q.spec.Name)
	}
	loc := cfg.Location
	if loc == nil {
		loc = time.UTC
	}
	if cfg.Cron == "" {
		return fmt.Errorf("%w: schedule %q of queue %q: Cron is required (e.g. \"*/5 * * * *\" or \"@every 10s\")", core.ErrInvalidConfig, name, q.spec.Name)
	}
	sched, err := feature.ParseSchedule(cfg.Cron, loc)
	if err != nil {
		return fmt.Errorf("%w: schedule %q of queue %q: Cron %q: %w", core.ErrInvalidConfig, name, q.spec.Name, cfg.Cron, err)
	}
	if cfg.Missed != SkipMissed && cfg.Missed != RunMissedOnce {
		return fmt.Errorf("%w: schedule %q: Missed %d is not SkipMissed or RunMissedOnce", core.ErrInvalidConfig, name, cfg.Missed)
	}
	build := cfg.Messages
	if build == nil {
		build = func(time.Time) []T { var zero T; return []T{zero} }
	}
	spec := &scheduleSpec{name: name, queue: q.spec.Name, cron: cfg.Cron, ticks: sched, missed: cfg.Missed,
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
