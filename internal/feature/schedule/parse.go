package schedule

import (
	"errors"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// This file says when a schedule ticks: at instants that do not depend on the node, its start
// or its restarts, so that every node claims the same ticks (see txmq.Queue.Schedule).

var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse parses a ScheduleConfig.Cron read in loc: a cron expression or descriptor
// gives robfig/cron's schedule in loc (its instants are absolute), "@every D" an
// everySchedule anchored at the Unix epoch.
func Parse(spec string, loc *time.Location) (Ticks, error) {
	spec = strings.TrimSpace(spec)
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, errors.New("a TZ= prefix is not accepted: set ScheduleConfig.Location")
	}
	sched, err := cronParser.Parse(spec)
	if err != nil {
		return nil, err
	}
	switch s := sched.(type) {
	case cron.ConstantDelaySchedule: // "@every D", D already rounded to whole seconds, at least 1 s
		return ticks{everySchedule{period: int64(s.Delay / time.Second)}}, nil
	case *cron.SpecSchedule:
		s.Location = loc // set here rather than by name, so that any *time.Location works
		return ticks{s}, nil
	}
	return ticks{sched}, nil
}

// ticks is a parsed schedule as the schedules feature reads it (Ticks).
type ticks struct{ cron.Schedule }

// Latest returns the latest tick strictly after after and at most upTo (latestTick).
func (t ticks) Latest(after, upTo time.Time) time.Time { return latestTick(t.Schedule, after, upTo) }

// everySchedule is "@every D" anchored at the Unix epoch: its ticks are the instants
// epoch + k·period seconds, whatever the time it is asked from.
type everySchedule struct{ period int64 } // seconds, at least 1

// Next returns the first tick strictly after t.
func (e everySchedule) Next(t time.Time) time.Time {
	k := t.Unix() / e.period // t.Unix() is the floor of t in seconds
	if t.Unix() < 0 && t.Unix()%e.period != 0 {
		k--
	}
	return time.Unix((k+1)*e.period, 0).In(t.Location())
}

// latestTick returns the latest tick of sched strictly after after and at most upTo, zero if
// none. It looks back from upTo over a window that grows until it finds one, so a long gap of
// a frequent schedule costs as little as a short one.
func latestTick(sched cron.Schedule, after, upTo time.Time) time.Time {
	if e, ok := sched.(everySchedule); ok {
		t := e.Next(upTo.Add(-time.Duration(e.period) * time.Second)) // the one tick in (upTo-D, upTo]
		if !t.After(after) {
			return time.Time{}
		}
		return t
	}
	for window := time.Minute; ; window *= 16 {
		from := upTo.Add(-window)
		if !from.After(after) || window > 20*365*24*time.Hour {
			from = after
		}
		var latest time.Time
		for t, i := sched.Next(from), 0; !t.After(upTo) && !t.IsZero() && i < 100_000; t, i = sched.Next(t), i+1 {
			latest = t
		}
		if !latest.IsZero() || from.Equal(after) {
			return latest
		}
	}
}
