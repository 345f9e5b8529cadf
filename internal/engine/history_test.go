package engine

import (
	"testing"
	"time"
)

func TestRunHistory(t *testing.T) {
	t.Parallel()
	var h runHistory
	now := time.Date(2026, 12, 1, 6, 30, 10, 0, time.UTC)
	h.add(now.Add(-61*time.Minute), 9, false) // older than the window: overwritten or out of it
	h.add(now.Add(-2*time.Minute), 3, false)
	h.add(now.Add(-2*time.Minute), 1, true)
	h.add(now, 5, false)
	got := h.last(now)
	if len(got) != historyMinutes || !got[len(got)-1].Minute.Equal(now.Truncate(time.Minute)) {
		t.Fatalf("last: %d minutes ending %v", len(got), got[len(got)-1].Minute)
	}
	want := map[int]MinuteRuns{
		historyMinutes - 1: {Batches: 1, Messages: 5},
		historyMinutes - 3: {Batches: 2, Messages: 4, Failed: 1},
	}
	for i, m := range got {
		w := want[i]
		if m.Batches != w.Batches || m.Messages != w.Messages || m.Failed != w.Failed {
			t.Errorf("minute %d (%v): %+v, want %+v", i, m.Minute, m, w)
		}
	}
}
