package chaos

import (
	"testing"
	"time"
)

// TestCompute checks the checker itself on hand-made delivery logs: a checker that cannot
// count a missing message, a phantom, a duplicate or an overlap would pass any scenario.
func TestCompute(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	run := func(q string, start, end int, ok bool, inc string, keys ...string) *runRec {
		r := &runRec{queue: q, keys: keys, start: at(start), ok: ok, inc: inc}
		if end >= 0 {
			r.end = at(end)
		}
		return r
	}
	committed := map[string]commit{"a": {at(0), "w"}, "b": {at(0), "w"}, "c": {at(500), "w"}}
	for _, tc := range []struct {
		name                                   string
		runs                                   []*runRec
		faults                                 []fault
		missing, phantom, duplicates, overlaps int
		recover                                time.Duration
	}{
		{
			name:    "all delivered once",
			runs:    []*runRec{run("w", 10, 20, true, "w0.1", "a", "b"), run("x", 600, 700, true, "w1.1", "c")},
			recover: 0,
		},
		{
			name:    "missing, phantom and a duplicate",
			runs:    []*runRec{run("w", 10, 20, true, "w0.1", "a", "z"), run("w", 30, 40, true, "w1.1", "a"), run("w", 50, 60, false, "w1.1", "b")},
			missing: 2, phantom: 1, duplicates: 1,
		},
		{
			name: "exclusive runs overlapping, one cut short by a kill",
			runs: []*runRec{
				run("x", 10, 100, true, "w0.1", "a"), run("x", 50, 60, true, "w1.1", "b"),
				run("x", 200, -1, false, "w2.1", "c"), run("x", 210, 300, true, "w0.1", "c"),
			},
			overlaps: 2,
		},
		{
			name:   "recovery after a kill: the interrupted run delivered again 2 s later",
			runs:   []*runRec{run("w", 10, 20, true, "w0.1", "a", "b"), run("w", 100, -1, false, "w2.1", "c"), run("w", 2400, 2500, true, "w1.1", "c")},
			faults: []fault{{start: at(400), end: at(400), killed: []string{"w2.1"}}},
			// c was committed at 500, after the kill: it is both the first message after the
			// fault and the interrupted one.
			recover: 2100 * time.Millisecond,
		},
		{
			name:    "never recovered",
			runs:    []*runRec{run("w", 10, 20, true, "w0.1", "a", "b")},
			faults:  []fault{{start: at(100), end: at(200)}},
			missing: 1, recover: -1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exited := map[string]time.Time{"w2.1": at(220)}
			f := compute(committed, tc.runs, tc.faults, "x", exited)
			if f.missing != tc.missing || f.phantom != tc.phantom || f.duplicates != tc.duplicates || f.overlaps != tc.overlaps || f.recover != tc.recover {
				t.Errorf("got missing %d phantom %d duplicates %d overlaps %d recover %v; want %d %d %d %d %v",
					f.missing, f.phantom, f.duplicates, f.overlaps, f.recover, tc.missing, tc.phantom, tc.duplicates, tc.overlaps, tc.recover)
			}
		})
	}
}
