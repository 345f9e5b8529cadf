package parity

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/txmq/txmq"
)

func init() {
	register("schedule",
		property{name: "each_tick_once_claims_slowed_past_a_period", run: scheduleTicksStalled},
	)
}

// This file holds the rule every tick property checks beside "published once": a running
// node claims every instant of each schedule from its start on, in order, late if it was
// stalled (within the feature's catch-up window of a minute, far longer than any stall of
// these properties), so a tick is lost only if every node that started before it died before
// getting to it. The properties record each process's ClaimTick calls (crashClaimer) and
// assert the rule on them, whatever the load of the machine.

// instantsOf is a schedule as the checks see it: its name and its next instant after a time.
type instantsOf struct {
	name string
	next func(time.Time) time.Time
}

// everyInstants returns the checks' view of the tick schedules of a property.
func everyInstants(scheds []tickSched) []instantsOf {
	out := make([]instantsOf, len(scheds))
	for i, s := range scheds {
		out[i] = instantsOf{name: s.name, next: nextEvery(time.Duration(s.period) * time.Second)}
	}
	return out
}

// between returns the instants of s in (from, to], in Unix seconds.
func (s instantsOf) between(from, to time.Time) []int64 {
	var out []int64
	for t := s.next(from); !t.After(to); t = s.next(t) {
		out = append(out, t.Unix())
	}
	return out
}

// checkClaimOrder fails the property for a process that skipped an instant: after its Start
// returned, the ticks each process asked to claim of each schedule are its instants from the
// first one after that moment, each once, in order, up to where the process stopped. (The
// instants before Start returned are the node's start, or its RunMissedOnce tick: not checked
// here.)
func (w *tickWorld) checkClaimOrder(scheds []instantsOf) {
	x := w.x
	x.T.Helper()
	w.mu.Lock()
	procs := append([]*tickProc(nil), w.procs...)
	w.mu.Unlock()
	for i, p := range procs {
		for _, s := range scheds {
			want := s.next(p.up)
			var got []string
			bad := false
			for _, c := range p.callsOf(s.name) {
				if !time.Unix(c.tick, 0).After(p.up) {
					continue
				}
				got = append(got, fmtTick(c.tick))
				if c.tick != want.Unix() {
					bad = true
				}
				want = s.next(time.Unix(c.tick, 0))
			}
			if bad {
				x.T.Errorf("process %d (started %s): schedule %s: ticks claimed after its start, in order: %v; want every instant from %s on, each once, in order (a running node claims every instant, late if it was stalled)",
					i, p.up.UTC().Format(time.RFC3339Nano), s.name, got, fmtTick(s.next(p.up).Unix()))
			}
		}
	}
}

// waitCaughtUp waits until every process of alive has got (its ClaimTick call returned) to
// the last instant up to cut of every schedule, and fails the property for any of its claims
// of the instants from its start up to cut that returned an error: a running node's claims
// are not lost, however long the loaded machine took it to get to them. (checkClaimOrder
// finds an instant it skipped.)
func (w *tickWorld) waitCaughtUp(alive []*tickProc, scheds []instantsOf, cut time.Time, what string) {
	x := w.x
	x.T.Helper()
	// behind lists, of each process of alive, the schedules it has not got to cut in.
	behind := func() []string {
		var out []string
		for i, p := range alive {
			for _, s := range scheds {
				in := s.between(p.up, cut)
				if len(in) == 0 {
					continue
				}
				got := false
				for _, c := range p.callsOf(s.name) {
					got = got || (c.done && c.tick >= in[len(in)-1])
				}
				if !got {
					out = append(out, fmt.Sprintf("process %d: %s up to %s", i, s.name, fmtTick(in[len(in)-1])))
				}
			}
		}
		return out
	}
	x.eventually(func() bool { return len(behind()) == 0 }, func() string {
		return fmt.Sprintf("%s: running processes got to their instants up to %s; behind: %v", what, cut.UTC().Format(time.RFC3339Nano), behind())
	})
	for i, p := range alive {
		for _, s := range scheds {
			in := map[int64]bool{}
			for _, t := range s.between(p.up, cut) {
				in[t] = true
			}
			for _, c := range p.callsOf(s.name) {
				if in[c.tick] && c.err != nil {
					x.T.Errorf("process %d, running through %s: schedule %s: its claim of tick %s failed: %v", i, cut.UTC().Format(time.RFC3339Nano), s.name, fmtTick(c.tick), c.err)
				}
			}
		}
	}
}

// checkClaimedPublished fails the property for a tick that a process's ClaimTick call
// returned without an error for (it claimed the tick, or another process had), and that was
// never published: a claimed tick is not lost, whoever claimed it and whenever it died.
// Call it once the outbox is drained.
func (w *tickWorld) checkClaimedPublished(scheds []instantsOf) {
	x := w.x
	x.T.Helper()
	w.mu.Lock()
	procs := append([]*tickProc(nil), w.procs...)
	w.mu.Unlock()
	for _, s := range scheds {
		lost := map[int64]bool{}
		for _, p := range procs {
			for _, c := range p.callsOf(s.name) {
				if c.done && c.err == nil && w.log.count(s.name+"@"+fmt.Sprint(c.tick)) == 0 {
					lost[c.tick] = true
				}
			}
		}
		var ticks []int64
		for t := range lost {
			ticks = append(ticks, t)
		}
		sort.Slice(ticks, func(i, j int) bool { return ticks[i] < ticks[j] })
		for _, t := range ticks {
			x.T.Errorf("schedule %s: tick %s was claimed (a ClaimTick returned without an error) but never published", s.name, fmtTick(t))
		}
	}
}

// scheduleTicksStalled: one process runs schedules of every routing mode (every 2 s and
// every 3 s, with SkipMissed and RunMissedOnce) while each of its claims waits 700 ms before
// it reaches the store (an overloaded machine, a slow database), so that one turn of its loop
// over the schedules takes longer than their period, for about 7 s; then its claims are quick
// again, and a second process joins. The stalled process claims every instant from its start
// on, late and in order (none is skipped while it runs, though no other process covers it),
// and every tick is published once.
func scheduleTicksStalled(x *X) {
	w := newTickWorld(x)
	specs := []struct {
		cron   string
		period int64
	}{{"*/2 * * * * *", 2}, {"@every 3s", 3}}
	var scheds []tickSched
	for i, mode := range routingModes {
		q := declare(x, txmq.QueueConfig[Msg]{Transactional: mode})
		for j, sp := range specs {
			missed := []txmq.Missed{txmq.SkipMissed, txmq.RunMissedOnce}[(i+j)%2]
			s := tickSched{name: fmt.Sprintf("stall-%s-%d-%s", strings.ToLower(mode.String()), sp.period, missedName(missed)), period: sp.period, missed: missed}
			if err := q.Schedule(s.name, txmq.ScheduleConfig[Msg]{Cron: sp.cron, Missed: missed}); err != nil {
				x.T.Fatalf("Schedule %s: %v", s.name, err)
			}
			scheds = append(scheds, s)
		}
	}
	checked := everyInstants(scheds)

	waitFrac(0.5)
	slow := w.start()
	slow.slow.Store(int64(700 * time.Millisecond))
	time.Sleep(7 * time.Second) // six schedules: a turn takes 4.2 s, more than either period
	slow.slow.Store(0)
	other := w.start()
	time.Sleep(2 * time.Second)
	cut := time.Now()
	procs := []*tickProc{slow, other}
	w.waitCaughtUp(procs, checked, cut, "after the stall")
	haltAll(x, procs)
	w.drain()

	w.checkClaimOrder(checked)
	w.checkClaimedPublished(checked)
	for _, s := range scheds {
		got := w.checkOnce(s.name, s.isInstant)
		// The stalled process ran alone from its start: every instant from there to the cut
		// is published, the ones it was stalled past included.
		ticksPublished(x, s.name, got, s.instants, [][2]time.Time{{slow.up, cut}}, cut, cut)
	}
}
