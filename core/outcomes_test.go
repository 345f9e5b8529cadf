package core_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestResultsMarks(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		mark  func(r *core.Results)
		want  []core.OutcomeKind
		isErr bool
	}{
		{name: "unmarked", mark: func(*core.Results) {}, want: []core.OutcomeKind{core.OutcomeDone, core.OutcomeDone, core.OutcomeDone}},
		{name: "one of each", mark: func(r *core.Results) { r.Retry(0, boom).Snooze(1, time.Second).Drop(2, boom) },
			want: []core.OutcomeKind{core.OutcomeRetry, core.OutcomeSnooze, core.OutcomeDrop}, isErr: true},
		{name: "discard", mark: func(r *core.Results) { r.Discard(2, "stale") },
			want: []core.OutcomeKind{core.OutcomeDone, core.OutcomeDone, core.OutcomeDiscard}, isErr: true},
		{name: "marked then done again", mark: func(r *core.Results) { r.Retry(1, boom).Done(1) },
			want: []core.OutcomeKind{core.OutcomeDone, core.OutcomeDone, core.OutcomeDone}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := core.NewResults(3)
			tc.mark(r)
			for i, k := range tc.want {
				if got := r.Outcome(i).Kind; got != k {
					t.Errorf("message %d: %v, want %v", i, got, k)
				}
			}
			if err := r.Err(); (err != nil) != tc.isErr {
				t.Errorf("Err() = %v; want an error: %v", err, tc.isErr)
			}
		})
	}
}

func TestResultsDetails(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := core.NewResults(4)
	r.Retry(0, nil).RetryAfter(1, -time.Second, boom).Snooze(2, -1).Drop(3, boom)
	if o := r.Outcome(0); o.Err == nil || o.HasDelay {
		t.Errorf("Retry(nil): %+v; want a non-nil error and the backoff", o)
	}
	if o := r.Outcome(1); !o.HasDelay || o.Delay != 0 || !errors.Is(o.Err, boom) {
		t.Errorf("RetryAfter(-1s): %+v; want delay 0 with the error", o)
	}
	if o := r.Outcome(2); o.Delay != 0 {
		t.Errorf("Snooze(-1): delay %v; want 0", o.Delay)
	}
	if o := r.Outcome(3); !core.IsPermanent(o.Err) || !errors.Is(o.Err, boom) {
		t.Errorf("Drop: %v; want a permanent error wrapping the listener's", o.Err)
	}
	if s := r.Error(); !strings.Contains(s, "1 retry") && !strings.Contains(s, "2 retry") || !strings.Contains(s, "1 drop") {
		t.Errorf("Error() = %q", s)
	}
	if o := r.Outcome(9); o.Kind != core.OutcomeDone {
		t.Errorf("Outcome out of range: %v; want done", o.Kind)
	}
	defer func() {
		if recover() == nil {
			t.Error("marking index 4 of 4 did not panic")
		}
	}()
	r.Retry(4, boom)
}

func TestResultsOf(t *testing.T) {
	t.Parallel()
	res := core.NewResults(2).Discard(0, "x")
	for _, tc := range []struct {
		name string
		err  error
		want []core.OutcomeKind // nil: no outcomes
	}{
		{name: "nil", err: nil},
		{name: "plain", err: errors.New("plain")},
		{name: "permanent", err: &core.PermanentError{Err: errors.New("p")}},
		{name: "results", err: res, want: []core.OutcomeKind{core.OutcomeDiscard, core.OutcomeDone}},
		{name: "wrapped results", err: fmt.Errorf("run: %w", res), want: []core.OutcomeKind{core.OutcomeDiscard, core.OutcomeDone}},
		{name: "snooze", err: &core.SnoozeError{Delay: time.Second}, want: []core.OutcomeKind{core.OutcomeSnooze, core.OutcomeSnooze}},
		{name: "wrapped discard", err: fmt.Errorf("x: %w", &core.DiscardError{Reason: "r"}), want: []core.OutcomeKind{core.OutcomeDiscard, core.OutcomeDiscard}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := core.ResultsOf(tc.err, 2)
			if (got != nil) != (tc.want != nil) {
				t.Fatalf("ResultsOf(%v) = %v; want outcomes: %v", tc.err, got, tc.want != nil)
			}
			for i, k := range tc.want {
				if o := got.Outcome(i); o.Kind != k {
					t.Errorf("message %d: %v, want %v", i, o.Kind, k)
				}
			}
		})
	}
}
