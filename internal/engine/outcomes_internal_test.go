package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

func TestDerivedID(t *testing.T) {
	t.Parallel()
	ids := []string{"m0", "m1", "m2"}
	g := &outcomeGroup{kind: core.OutcomeRetry, delay: time.Second, idx: []int{1, 2}}
	a := derivedID("b1", 2, 0, g, ids)
	if a != derivedID("b1", 2, 0, g, ids) {
		t.Fatal("derivedID is not stable")
	}
	if !strings.HasPrefix(a, "b1/2/retry-") {
		t.Errorf("derivedID = %q; want b1/2/retry-<hash>", a)
	}
	for name, other := range map[string]string{
		"another attempt": derivedID("b1", 3, 0, g, ids),
		"a replay":        derivedID("b1", 2, 1, g, ids),
		"another batch":   derivedID("b2", 2, 0, g, ids),
		"other messages":  derivedID("b1", 2, 0, &outcomeGroup{kind: core.OutcomeRetry, delay: time.Second, idx: []int{0}}, ids),
		"another delay":   derivedID("b1", 2, 0, &outcomeGroup{kind: core.OutcomeRetry, delay: 2 * time.Second, idx: []int{1, 2}}, ids),
		"another kind":    derivedID("b1", 2, 0, &outcomeGroup{kind: core.OutcomeSnooze, delay: time.Second, idx: []int{1, 2}}, ids),
	} {
		if other == a {
			t.Errorf("%s gives the same id %q", name, a)
		}
	}
	long := strings.Repeat("x", 200)
	if got := derivedID(long, 1, 0, g, ids); len(got) > maxDerivedBase+32 {
		t.Errorf("derived id of a long base is %d bytes: %q", len(got), got)
	}
}

func TestHoldKey(t *testing.T) {
	t.Parallel()
	grp := func(k core.OutcomeKind, idx ...int) *outcomeGroup { return &outcomeGroup{kind: k, idx: idx} }
	show := func(gs []*outcomeGroup) string {
		var s []string
		for _, g := range gs {
			s = append(s, fmt.Sprintf("%v%v", g.kind, g.idx))
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		name   string
		groups []*outcomeGroup
		count  int
		want   string
		head   string
	}{
		{name: "no head", groups: []*outcomeGroup{grp(core.OutcomeDone, 0, 2), grp(core.OutcomeDrop, 1)}, count: 3, want: "done[0 2] drop[1]"},
		{name: "retry at 2 of 5", groups: []*outcomeGroup{grp(core.OutcomeDone, 0, 1, 3), grp(core.OutcomeRetry, 2), grp(core.OutcomeDiscard, 4)},
			count: 5, want: "done[0 1] retry[2 3 4]", head: "retry[2 3 4]"},
		{name: "snooze before retry", groups: []*outcomeGroup{grp(core.OutcomeDrop, 0), grp(core.OutcomeRetry, 3), grp(core.OutcomeSnooze, 1)},
			count: 4, want: "drop[0] snooze[1 2 3]", head: "snooze[1 2 3]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, head := holdKey(tc.groups, tc.count)
			if got := show(out); got != tc.want {
				t.Errorf("groups %s; want %s", got, tc.want)
			}
			got := ""
			if head != nil {
				got = show([]*outcomeGroup{head})
			}
			if got != tc.head {
				t.Errorf("head %q; want %q", got, tc.head)
			}
		})
	}
}

func TestPlanOutcomes(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	rn := &runner{}
	spec := &Spec{Name: "q", MaxAttempts: 3, MaxSnoozes: 2}
	batch := func(snoozes int) *Batch {
		return &Batch{Header: &envelope.Header{ID: "b", Snoozes: snoozes}, Count: 5}
	}
	for _, tc := range []struct {
		name    string
		run     int
		snoozes int
		mark    func(r *core.Results)
		want    string
	}{
		{name: "every path", run: 1, mark: func(r *core.Results) {
			r.RetryAfter(1, time.Second, boom).Snooze(2, time.Minute).Drop(3, boom).Discard(4, "dup")
		}, want: "done[0] retry[1] snooze[2] drop(permanent)[3] discard(dup)[4]"},
		{name: "same delay shares a group", run: 1, mark: func(r *core.Results) {
			r.RetryAfter(0, time.Second, boom).RetryAfter(3, time.Second, boom).RetryAfter(4, 2*time.Second, boom)
		}, want: "retry[0 3] done[1 2] retry[4]"},
		{name: "retry past the budget", run: 3, mark: func(r *core.Results) { r.RetryAfter(0, time.Second, boom) },
			want: "drop(delivery_exhausted)[0] done[1 2 3 4]"},
		{name: "snooze past MaxSnoozes", run: 1, snoozes: 2, mark: func(r *core.Results) { r.Snooze(4, time.Second) },
			want: "done[0 1 2 3] drop(snooze_exhausted)[4]"},
		{name: "drops with other errors apart", run: 1, mark: func(r *core.Results) {
			r.Drop(0, boom).Drop(1, errors.New("other")).Drop(2, boom)
		}, want: "drop(permanent)[0 2] drop(permanent)[1] done[3 4]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := core.NewResults(5)
			tc.mark(res)
			var s []string
			for _, g := range rn.planOutcomes(spec, batch(tc.snoozes), tc.run, res) {
				label := g.kind.String()
				if g.reason != "" {
					label += "(" + g.reason + ")"
				}
				s = append(s, fmt.Sprintf("%s%v", label, g.idx))
			}
			if got := strings.Join(s, " "); got != tc.want {
				t.Errorf("groups %s; want %s", got, tc.want)
			}
		})
	}
}
