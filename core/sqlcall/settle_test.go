package sqlcall

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/txmq/txmq/core"
)

func TestSettle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		held        bool
		err         error
		settles     bool
		want        error
		wantSettled bool
	}{
		{"settle held", true, nil, true, nil, true},
		{"extend held", true, nil, false, nil, false},
		{"lease lost", false, nil, true, core.ErrLeaseLost, false},
		{"statement failed", false, errOther, true, errOther, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runner(new(atomic.Bool))
			var s Settlement
			c := &core.Claim{Queue: "q"}
			calls := 0
			apply := func() (bool, error) { calls++; return tc.held, tc.err }
			err := r.Settle(&s, "ack", c, tc.settles, apply)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Settle = %v, want %v", err, tc.want)
			}
			// A second call runs apply again unless the first settled the claim.
			if err := r.Settle(&s, "ack", c, tc.settles, func() (bool, error) { calls++; return true, nil }); err != nil {
				t.Fatalf("second Settle: %v", err)
			}
			wantCalls := 2
			if tc.wantSettled {
				wantCalls = 1
			}
			if calls != wantCalls {
				t.Errorf("apply ran %d times, want %d", calls, wantCalls)
			}
		})
	}
}

func TestSettleMarkedSettledIsNoop(t *testing.T) {
	t.Parallel()
	r := runner(new(atomic.Bool))
	var s Settlement
	s.MarkSettled()
	if err := r.Settle(&s, "retry", &core.Claim{}, true, func() (bool, error) {
		t.Fatal("apply ran for a settled claim")
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestUsable(t *testing.T) {
	t.Parallel()
	closed := new(atomic.Bool)
	r := runner(closed)
	if err := r.Usable("fetch"); err != nil {
		t.Fatalf("Usable before Close = %v", err)
	}
	closed.Store(true)
	if err := r.Usable("fetch"); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Usable after Close = %v, want ErrClosed", err)
	}
}
