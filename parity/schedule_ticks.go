package parity

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/txmq/txmq"
)

func init() {
	register("schedule",
		property{name: "each_tick_once_nodes_started_apart_crashes_missed", run: scheduleTicksCrashes},
		property{name: "tick_kept_when_claimer_dies_never", run: func(x *X) { scheduleClaimCrash(x, txmq.Never) }},
		property{name: "tick_kept_when_claimer_dies_try", run: func(x *X) { scheduleClaimCrash(x, txmq.Try) }},
		property{name: "tick_kept_when_claimer_dies_require", run: func(x *X) { scheduleClaimCrash(x, txmq.Require) }},
	)
}

// tickSched is one schedule of a tick property and what the suite expects of it.
type tickSched struct {
	name   string
	period int64 // its instants are the Unix seconds divisible by period
	missed txmq.Missed
}

func (s tickSched) isInstant(t int64) bool { return t%s.period == 0 }

// instants returns the instants of s in (from, to].
func (s tickSched) instants(from, to time.Time) []int64 {
	var out []int64
	for t := (from.Unix()/s.period + 1) * s.period; t <= to.Unix(); t += s.period {
		if time.Unix(t, 0).After(from) {
			out = append(out, t)
		}
	}
	return out
}

var routingModes = []txmq.Transactional{txmq.Require, txmq.Try, txmq.Never}

// scheduleTicksCrashes: three processes (node, outbox store, backend client) started at
// moments not aligned to a second run schedules of every routing mode (Require, Try, Never),
// with a cron expression with seconds (every 2 s), an @every that divides a minute (3 s) and
// one that does not (7 s), each with SkipMissed and RunMissedOnce. One process dies in each
// window of a tick (before its claim; after its claim, before anything is published; after
// the publish) and is replaced by a new one started at another moment; then every process
// dies at once, and three new ones start a while later. Every tick published is an instant of
// its spec (the same instants on every node, whatever its start), and is published once;
// every process claims every instant from its start on, in order, until it dies (late if the
// machine is loaded: none is skipped, see checkClaimOrder); every tick claimed is published;
// the processes running at the end of each phase claim every instant from their start to
// it without an error; of the instants of the full outage, SkipMissed publishes none and
// RunMissedOnce only the latest, once. (An instant is lost only if every process that
// started before it died before getting to it: on a loaded machine the processes killed in
// the first phase may lag that far, so the property asserts the rule above rather than "every
// instant while a process ran".)
func scheduleTicksCrashes(x *X) {
	w := newTickWorld(x)
	specs := []struct {
		cron   string
		period int64
	}{{"*/2 * * * * *", 2}, {"@every 3s", 3}, {"@every 7s", 7}}
	var scheds []tickSched
	for _, mode := range routingModes {
		q := declare(x, txmq.QueueConfig[Msg]{Transactional: mode})
		for _, sp := range specs {
			for _, missed := range []txmq.Missed{txmq.SkipMissed, txmq.RunMissedOnce} {
				s := tickSched{name: fmt.Sprintf("%s-%d-%s", strings.ToLower(mode.String()), sp.period, missedName(missed)), period: sp.period, missed: missed}
				if err := q.Schedule(s.name, txmq.ScheduleConfig[Msg]{Cron: sp.cron, Missed: missed}); err != nil {
					x.T.Fatalf("Schedule %s: %v", s.name, err)
				}
				scheds = append(scheds, s)
			}
		}
	}

	waitFrac(0.5) // the first process starts half-way between two seconds
	procs := []*tickProc{w.start()}
	time.Sleep(370 * time.Millisecond)
	procs = append(procs, w.start())
	time.Sleep(840 * time.Millisecond)
	procs = append(procs, w.start())
	for i, win := range []tickWindow{crashBeforeClaim, crashAfterClaim, crashAfterPublish} {
		procs[i].arm(win)
		procs[i].waitCrashed(x, win.String())
		time.Sleep(time.Duration(130+330*i) * time.Millisecond)
		procs[i] = w.start()
	}

	// RunMissedOnce needs a tick claimed before the outage (a schedule that never ran missed
	// nothing): wait for one of every schedule.
	x.eventually(func() bool {
		for _, s := range scheds {
			if len(w.log.ticks(s.name)) == 0 {
				return false
			}
		}
		return true
	}, "a tick of every schedule published before the outage")
	// The running processes claim every instant up to now before the outage: a loaded
	// machine may take a process more than a second from an instant to its claim, so the
	// property waits for the claims rather than allowing a fixed margin.
	checked := everyInstants(scheds)
	w.waitCaughtUp(procs, checked, time.Now(), "before the outage")
	haltAll(x, procs)
	outageSeen := time.Now() // no process claims a tick from here on
	time.Sleep(2 * time.Second)
	waitFrac(0.5)
	restart := time.Now() // the instants of the full outage end here
	procs = []*tickProc{w.start()}
	started := procs[0].up // a process runs from here on
	time.Sleep(290 * time.Millisecond)
	procs = append(procs, w.start())
	time.Sleep(610 * time.Millisecond)
	procs = append(procs, w.start())
	time.Sleep(2500 * time.Millisecond)
	w.waitCaughtUp(procs, checked, time.Now(), "at the end")
	haltAll(x, procs)
	w.drain()
	w.checkClaimOrder(checked)
	w.checkClaimedPublished(checked)

	for _, s := range scheds {
		got := w.checkOnce(s.name, s.isInstant)
		// Instants while every process was down: an instant between restart and started (a
		// loaded machine took the first new process that long to start) may have been missed
		// or run by it: it is not in the gap.
		published, gap, gapPublished := ticksPublished(x, s.name, got, s.instants, nil, outageSeen, restart)
		starting := s.instants(restart, started)
		switch s.missed {
		case txmq.SkipMissed:
			if len(gapPublished) > 0 {
				x.T.Errorf("schedule %s (SkipMissed): ticks %v missed while every process was down were published", s.name, gapPublished)
			}
		case txmq.RunMissedOnce:
			if len(gap) > 0 && len(starting) > 0 && len(gapPublished) == 0 && published[starting[len(starting)-1]] {
				break // the latest missed instant came while the first new process started
			}
			if len(gap) > 0 && (len(gapPublished) != 1 || gapPublished[0] != gap[len(gap)-1]) {
				x.T.Errorf("schedule %s (RunMissedOnce): of the ticks %v missed while every process was down, %v were published; want the latest, %d, alone", s.name, gap, gapPublished, gap[len(gap)-1])
			}
		}
	}
}

// ticksPublished checks the ticks got of schedule name (publish instants in Unix seconds):
// every instant of the windows ran (while a process ran) is published. It returns the
// published set, the instants between gapFrom and gapTo (every process down) and those of them
// that were published, for the Missed policy's check.
func ticksPublished(x *X, name string, got []int64, instants func(from, to time.Time) []int64, ran [][2]time.Time, gapFrom, gapTo time.Time) (published map[int64]bool, gap, gapPublished []int64) {
	x.T.Helper()
	published = map[int64]bool{}
	for _, t := range got {
		published[t] = true
	}
	for _, win := range ran {
		for _, t := range instants(win[0], win[1]) {
			if !published[t] {
				x.T.Errorf("schedule %s: tick %s skipped (0 publishes) while processes ran; published %v", name, fmtTick(t), got)
			}
		}
	}
	gap = instants(gapFrom, gapTo)
	for _, t := range gap {
		if published[t] {
			gapPublished = append(gapPublished, t)
		}
	}
	return published, gap, gapPublished
}

func missedName(m txmq.Missed) string {
	if m == txmq.RunMissedOnce {
		return "runonce"
	}
	return "skip"
}

// scheduleClaimCrash: a process dies right after claiming a tick of a schedule on a queue of
// the given routing mode (the claim and the tick's messages are in the claim's transaction,
// which commits, and nothing else of the process happens). The tick is not lost: it is
// published once (by another process's recovery of the outbox), and no other process
// publishes it again.
func scheduleClaimCrash(x *X, mode txmq.Transactional) {
	w := newTickWorld(x)
	q := declare(x, txmq.QueueConfig[Msg]{Transactional: mode})
	name := "claimcrash-" + strings.ToLower(mode.String())
	if err := q.Schedule(name, txmq.ScheduleConfig[Msg]{Cron: "@every 1s"}); err != nil {
		x.T.Fatalf("Schedule: %v", err)
	}
	p := w.start()
	p.arm(crashAfterClaim)
	p.waitCrashed(x, crashAfterClaim.String())
	last, err := w.sweeper.Ticks().LastTick(x.ctx(), name)
	if err != nil || last.IsZero() {
		x.T.Fatalf("LastTick after the crash: %v, %v; want the tick the dead process claimed", last, err)
	}
	other := w.start() // claims the next ticks, never the dead process's one again
	id := name + "@" + strconv.FormatInt(last.Unix(), 10)
	x.eventually(func() bool { return w.log.count(id) > 0 }, func() string {
		return fmt.Sprintf("tick %s of a %s queue, claimed by a process that died right after the claim, published (%d publishes)", fmtTick(last.Unix()), mode, w.log.count(id))
	})
	haltAll(x, []*tickProc{other})
	w.drain()
	w.checkOnce(name, func(int64) bool { return true })
}
