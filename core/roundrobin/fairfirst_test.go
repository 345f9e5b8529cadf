package roundrobin

import (
	"errors"
	"fmt"
	"testing"
)

func TestFairFirst(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		fair       []bool
		limits     []int
		budget     int
		ready      []int // rows each queue has ready
		wantLimits string
		wantBudget int
		wantAsked  string // (queue, n) of each pick
		wantRows   int
	}{
		{name: "no fair queue", fair: []bool{false, false}, limits: []int{5, 5}, budget: 8, ready: []int{9, 9},
			wantLimits: "[5 5]", wantBudget: 8, wantAsked: "[]", wantRows: 0},
		{name: "fair queues first, in order, each cut to the budget left", fair: []bool{true, false, true}, limits: []int{5, 7, 6}, budget: 8, ready: []int{9, 9, 9},
			wantLimits: "[0 7 0]", wantBudget: 0, wantAsked: "[0:5 2:3]", wantRows: 8},
		{name: "a fair queue with fewer rows leaves budget", fair: []bool{true, true}, limits: []int{5, 5}, budget: 8, ready: []int{2, 9},
			wantLimits: "[0 0]", wantBudget: 1, wantAsked: "[0:5 1:5]", wantRows: 7},
		{name: "no budget left: asked for none", fair: []bool{true, true}, limits: []int{4, 4}, budget: 4, ready: []int{9, 9},
			wantLimits: "[0 0]", wantBudget: 0, wantAsked: "[0:4 1:0]", wantRows: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			asked := []string{}
			before := fmt.Sprint(tt.limits)
			limits, budget, rows, err := FairFirst(tt.fair, tt.limits, tt.budget, func(i, n int) ([]int, error) {
				asked = append(asked, fmt.Sprintf("%d:%d", i, n))
				return make([]int, max(0, min(n, tt.ready[i]))), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if s := fmt.Sprint(limits); s != tt.wantLimits {
				t.Errorf("limits %s, want %s", s, tt.wantLimits)
			}
			if budget != tt.wantBudget || len(rows) != tt.wantRows {
				t.Errorf("budget %d and %d rows, want %d and %d", budget, len(rows), tt.wantBudget, tt.wantRows)
			}
			if s := fmt.Sprint(asked); s != tt.wantAsked {
				t.Errorf("picks %s, want %s", s, tt.wantAsked)
			}
			if s := fmt.Sprint(tt.limits); s != before {
				t.Errorf("the caller's limits changed from %s to %s", before, s)
			}
		})
	}
	t.Run("a pick's error", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		in := []int{3, 3}
		_, _, _, err := FairFirst([]bool{true, true}, in, 6, func(int, int) ([]int, error) { return nil, boom })
		if !errors.Is(err, boom) {
			t.Fatalf("err %v, want the pick's", err)
		}
		if fmt.Sprint(in) != "[3 3]" {
			t.Fatalf("the caller's limits changed: %v", in)
		}
	})
}
