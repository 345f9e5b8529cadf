package schedule

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestScheduleTicksFixedInstants: for every kind of spec Schedule accepts (cron with and
// without seconds, descriptors, "@every" that does and does not divide a minute, an hour or a
// day, in UTC and in fixed zones), the first tick after any start time is the tick of one
// chain of instants: the ticks do not depend on when a node starts or restarts. "@every D"
// ticks at epoch + k·D.
func TestScheduleTicksFixedInstants(t *testing.T) {
	t.Parallel()
	plus0530 := time.FixedZone("UTC+05:30", 5*3600+30*60)
	minus0345 := time.FixedZone("UTC-03:45", -(3*3600 + 45*60))
	tests := []struct {
		spec   string
		loc    *time.Location
		period time.Duration // the longest gap between two ticks, to size the test
		every  int64         // for "@every": the period in seconds
	}{
		{spec: "*/2 * * * * *", period: 2 * time.Second},
		{spec: "7,23,41 * * * * *", period: 26 * time.Second},
		{spec: "*/5 * * * *", period: 5 * time.Minute},
		{spec: "0 2 * * *", loc: minus0345, period: 24 * time.Hour},
		{spec: "@every 1s", period: time.Second, every: 1},
		{spec: "@every 3s", period: 3 * time.Second, every: 3},
		{spec: "@every 7s", period: 7 * time.Second, every: 7},
		{spec: "@every 1500ms", period: time.Second, every: 1}, // robfig/cron rounds down to whole seconds
		{spec: "@every 90m", loc: plus0530, period: 90 * time.Minute, every: 5400},
		{spec: "@every 25h", period: 25 * time.Hour, every: 90000},
		{spec: "@every 36h", loc: minus0345, period: 36 * time.Hour, every: 129600},
		{spec: "@hourly", loc: plus0530, period: time.Hour},
		{spec: "@daily", period: 24 * time.Hour},
		{spec: "@daily", loc: plus0530, period: 24 * time.Hour},
		{spec: "@weekly", period: 7 * 24 * time.Hour},
		{spec: "@monthly", loc: minus0345, period: 31 * 24 * time.Hour},
	}
	rng := rand.New(rand.NewPCG(27, 2))
	base := time.Date(2026, 3, 28, 23, 59, 58, 123456789, time.UTC) // across a month's end
	for _, tt := range tests {
		loc := tt.loc
		if loc == nil {
			loc = time.UTC
		}
		sched, err := Parse(tt.spec, loc)
		if err != nil {
			t.Fatalf("%s: %v", tt.spec, err)
		}
		var chain []time.Time
		for tick := sched.Next(base); tick.Before(base.Add(40 * tt.period)); tick = sched.Next(tick) {
			chain = append(chain, tick)
			if tt.every > 0 && tick.Unix()%tt.every != 0 {
				t.Errorf("%s: tick %v is not epoch + k·%ds", tt.spec, tick, tt.every)
			}
		}
		for range 200 {
			start := base.Add(time.Duration(rng.Int64N(int64(30 * tt.period))))
			if tt.every > 0 && rng.IntN(4) == 0 {
				start = chain[rng.IntN(len(chain)/2)] // a start exactly on a tick: the next one
			}
			got := sched.Next(start.In(time.FixedZone("node", rng.IntN(24*3600)-12*3600)))
			var want time.Time
			for _, c := range chain {
				if c.After(start) {
					want = c
					break
				}
			}
			if !got.Equal(want) {
				t.Errorf("%s in %s: the first tick after a start at %v is %v; want %v, the tick of every other start", tt.spec, loc, start, got, want)
				break
			}
		}
	}
}

// TestLatestTick: the latest tick after the last claimed one and up to now, over short and
// long gaps, none when there is none.
func TestLatestTick(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		spec              string
		after, upTo, want string // want "" means none
	}{
		{"@every 7s", "2026-01-01T00:00:00Z", "2026-01-01T00:00:30.5Z", "2026-01-01T00:00:28Z"}, // 1767225600 = 7·252460800
		{"@every 7s", "2026-01-01T00:00:28Z", "2026-01-01T00:00:34.9Z", ""},
		{"@every 7s", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-01-31T23:59:56Z"},
		{"* * * * * *", "2026-01-01T00:00:00Z", "2026-03-01T12:00:00.7Z", "2026-03-01T12:00:00Z"},
		{"@daily", "2026-01-01T00:00:00Z", "2026-01-11T13:00:00Z", "2026-01-11T00:00:00Z"},
		{"@daily", "2026-01-11T00:00:00Z", "2026-01-11T13:00:00Z", ""},
		{"0 0 1 1 *", "2020-01-01T00:00:00Z", "2026-06-01T00:00:00Z", "2026-01-01T00:00:00Z"},
	}
	for _, tt := range tests {
		sched, err := Parse(tt.spec, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		got := latestTick(sched, at(tt.after), at(tt.upTo))
		switch {
		case tt.want == "" && !got.IsZero():
			t.Errorf("%s after %s up to %s: %v; want none", tt.spec, tt.after, tt.upTo, got)
		case tt.want != "" && !got.Equal(at(tt.want)):
			t.Errorf("%s after %s up to %s: %v; want %s", tt.spec, tt.after, tt.upTo, got, tt.want)
		}
	}
}
