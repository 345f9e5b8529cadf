package parity

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
)

func init() {
	register("schedule",
		property{name: "long_specs_each_tick_once_test_clock", run: scheduleTicksClock},
	)
}

// jumpClock is a node clock that the property moves forward: real time plus an offset.
type jumpClock struct{ off atomic.Int64 }

func (c *jumpClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

// set makes the clock read t now.
func (c *jumpClock) set(t time.Time) { c.off.Store(int64(time.Until(t))) }

// clockSched is a schedule of scheduleTicksClock: next gives its first instant strictly after
// a time, computed by the suite (not by txmq).
type clockSched struct {
	name   string
	cron   string
	loc    *time.Location
	missed txmq.Missed
	next   func(t time.Time) time.Time
}

func (s clockSched) isInstant(t int64) bool {
	return s.next(time.Unix(t-1, 0)).Equal(time.Unix(t, 0))
}

// instants returns the instants of s in (from, to].
func (s clockSched) instants(from, to time.Time) []int64 {
	var out []int64
	for t := s.next(from); !t.After(to); t = s.next(t) {
		out = append(out, t.Unix())
	}
	return out
}

// nextMidnight is @daily read in loc.
func nextMidnight(loc *time.Location) func(time.Time) time.Time {
	return func(t time.Time) time.Time {
		y, m, d := t.In(loc).Date()
		return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	}
}

// nextEvery is "@every d" anchored at the Unix epoch, as documented by Queue.Schedule.
func nextEvery(d time.Duration) func(time.Time) time.Time {
	p := int64(d / time.Second)
	return func(t time.Time) time.Time {
		s := t.Unix()
		k := s / p
		if s < 0 && s%p != 0 {
			k--
		}
		return time.Unix((k+1)*p, 0)
	}
}

// scheduleTicksClock: schedules whose ticks are hours or days apart (@daily in UTC and in a
// zone 5:30 ahead, "@every 36h", each with SkipMissed and RunMissedOnce) run on three
// processes whose nodes read a test clock (NodeOptions.Clock) that the property moves forward
// to just before each next instant. The processes start hours apart on that clock; one is
// replaced after a while; then every process dies, the clock jumps days ahead, and three new
// ones start. Every tick is an instant of its spec and is published once; every instant while
// a process ran is published, and each process claims every instant from its start on, in
// order; of the instants of the outage, SkipMissed publishes none and RunMissedOnce the
// latest alone.
func scheduleTicksClock(x *X) {
	w := newTickWorld(x)
	clk := &jumpClock{}
	w.clock = clk
	ist := time.FixedZone("UTC+05:30", 5*3600+30*60)
	q := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Never})
	var scheds []clockSched
	for _, missed := range []txmq.Missed{txmq.SkipMissed, txmq.RunMissedOnce} {
		scheds = append(scheds,
			clockSched{name: "daily-utc-" + missedName(missed), cron: "@daily", missed: missed, next: nextMidnight(time.UTC)},
			clockSched{name: "daily-ist-" + missedName(missed), cron: "@daily", loc: ist, missed: missed, next: nextMidnight(ist)},
			clockSched{name: "every36h-" + missedName(missed), cron: "@every 36h", missed: missed, next: nextEvery(36 * time.Hour)})
	}
	for _, s := range scheds {
		if err := q.Schedule(s.name, txmq.ScheduleConfig[Msg]{Cron: s.cron, Location: s.loc, Missed: s.missed}); err != nil {
			x.T.Fatalf("Schedule %s: %v", s.name, err)
		}
	}
	// missing returns the instants of every schedule in (from, to] not published yet.
	missing := func(from, to time.Time) []string {
		var out []string
		for _, s := range scheds {
			for _, t := range s.instants(from, to) {
				if w.log.count(s.name+"@"+fmt.Sprint(t)) == 0 {
					out = append(out, s.name+"@"+fmtTick(t))
				}
			}
		}
		return out
	}
	checked := make([]instantsOf, len(scheds))
	for i, s := range scheds {
		checked[i] = instantsOf{name: s.name, next: s.next}
	}
	var procs []*tickProc // the running processes
	// rounds moves the clock to just before the next instant of any schedule, waits until
	// every instant in (from, that instant] is published and every running process got to
	// it, and goes on until the clock reads until. No instant is ever jumped over while
	// processes run (a node whose clock jumps more than a minute past an instant it did not
	// get to skips it, as a node stalled that long does).
	rounds := func(from, until time.Time) time.Time {
		x.T.Helper()
		var last time.Time
		for clk.Now().Before(until) {
			now := clk.Now()
			target := scheds[0].next(now)
			for _, s := range scheds[1:] {
				if t := s.next(now); t.Before(target) {
					target = t
				}
			}
			if target.Sub(now) > 300*time.Millisecond {
				clk.set(target.Add(-300 * time.Millisecond))
			}
			x.eventually(func() bool { return len(missing(from, target)) == 0 }, func() string {
				return fmt.Sprintf("every tick up to %s published by processes on the test clock; missing %v", target.UTC().Format(time.RFC3339), missing(from, target))
			})
			w.waitCaughtUp(procs, checked, target, "on the test clock")
			last = target
		}
		return last
	}

	// Day 0 begins 1.5 s before the clock; no instant comes before 12:00 UTC.
	y, m, d := time.Now().UTC().Date()
	day0 := time.Date(y, m, d+2, 0, 0, 0, 0, time.UTC)
	start := day0.Add(1500 * time.Millisecond)
	clk.set(start)
	procs = []*tickProc{w.start()}
	clk.set(start.Add(4*time.Hour + 17*time.Minute))
	procs = append(procs, w.start())
	clk.set(start.Add(9*time.Hour + 41*time.Minute))
	procs = append(procs, w.start())
	rounds(start, start.Add(20*time.Hour))
	procs[0].kill(x) // replaced at another moment of the clock
	procs[0] = w.start()
	rounds(start, start.Add(36*time.Hour))

	haltAll(x, procs)
	outage := clk.Now()
	restart := day0.AddDate(0, 0, 4).Add(6*time.Hour + 500*time.Millisecond) // far from every instant
	clk.set(restart)
	procs = []*tickProc{w.start()}
	time.Sleep(250 * time.Millisecond)
	procs = append(procs, w.start())
	time.Sleep(250 * time.Millisecond)
	procs = append(procs, w.start())
	// The latest instant of the outage (RunMissedOnce) comes with the first one after it.
	end := rounds(restart, restart.Add(24*time.Hour))
	haltAll(x, procs)
	w.drain()
	w.checkClaimOrder(checked)
	w.checkClaimedPublished(checked)

	for _, s := range scheds {
		got := w.checkOnce(s.name, s.isInstant)
		_, gap, gapPublished := ticksPublished(x, s.name, got, s.instants,
			[][2]time.Time{{start, outage}, {restart, end}}, outage, restart)
		switch {
		case len(gap) == 0:
			x.T.Errorf("schedule %s: no instant in the outage (%s to %s): the property does not test the Missed policy", s.name, outage.UTC(), restart.UTC())
		case s.missed == txmq.SkipMissed && len(gapPublished) > 0:
			x.T.Errorf("schedule %s (SkipMissed): ticks %v missed while every process was down were published", s.name, gapPublished)
		case s.missed == txmq.RunMissedOnce && (len(gapPublished) != 1 || gapPublished[0] != gap[len(gap)-1]):
			x.T.Errorf("schedule %s (RunMissedOnce): of the ticks %v missed while every process was down, %v were published; want the latest, %d, alone", s.name, gap, gapPublished, gap[len(gap)-1])
		}
	}
}
