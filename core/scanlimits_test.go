package core

import (
	"slices"
	"testing"
)

func TestScanLimits(t *testing.T) {
	t.Parallel()
	q := func(name string, free int) QueueSlots { return QueueSlots{Queue: name, Free: free} }
	for _, tc := range []struct {
		name       string
		req        FetchRequest
		wantQueues []string
		wantLimits []int
	}{
		{"empty", FetchRequest{Max: 100}, []string{}, []int{}},
		{"one queue takes Max", FetchRequest{Max: 100, Queues: []QueueSlots{q("a", 100)}}, []string{"a"}, []int{100}},
		{"capped by Free", FetchRequest{Max: 100, Queues: []QueueSlots{q("a", 3)}}, []string{"a"}, []int{3}},
		{"two share twice Max over n", FetchRequest{Max: 100, Queues: []QueueSlots{q("b", 100), q("a", 100)}}, []string{"a", "b"}, []int{100, 100}},
		{"many queues scan at least 10", FetchRequest{Max: 100, Queues: []QueueSlots{q("c", 100), q("b", 100), q("a", 100), q("d", 100), q("e", 100), q("f", 100), q("g", 100), q("h", 100), q("i", 100), q("j", 100), q("k", 100), q("l", 100), q("m", 100), q("n", 100), q("o", 100), q("p", 100), q("q", 100), q("r", 100), q("s", 100), q("t", 100), q("u", 100)}},
			[]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u"},
			[]int{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}},
		{"never over Max", FetchRequest{Max: 4, Queues: []QueueSlots{q("a", 4), q("b", 4)}}, []string{"a", "b"}, []int{4, 4}},
		{"repeats and empty names dropped", FetchRequest{Max: 10, Queues: []QueueSlots{q("a", 2), q("", 5), q("a", 9)}}, []string{"a"}, []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			qs, limits := tc.req.ScanLimits()
			names := make([]string, len(qs))
			for i, s := range qs {
				names[i] = s.Queue
			}
			if !slices.Equal(names, tc.wantQueues) || !slices.Equal(limits, tc.wantLimits) {
				t.Errorf("ScanLimits = %v %v; want %v %v", names, limits, tc.wantQueues, tc.wantLimits)
			}
		})
	}
}
