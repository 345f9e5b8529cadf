package reaper

import (
	"slices"
	"testing"
	"time"
)

func TestHeartbeatsDueAndFailed(t *testing.T) {
	t.Parallel()
	var h Heartbeats
	t0 := time.Unix(1000, 0)
	every := time.Minute
	steps := []struct {
		name   string
		queues []string
		at     time.Time
		failed bool // the write of what was due failed
		want   []string
	}{
		{"first fetch writes all", []string{"a", "b"}, t0, false, []string{"a", "b"}},
		{"within the interval writes none", []string{"a", "b"}, t0.Add(every - 1), false, nil},
		{"a new queue is due at once", []string{"a", "c"}, t0.Add(time.Second), true, []string{"c"}},
		{"a failed write is due again", []string{"c"}, t0.Add(2 * time.Second), false, []string{"c"}},
		{"after the interval all are due", []string{"a", "b", "c"}, t0.Add(every), false, []string{"a", "b"}},
	}
	for _, s := range steps {
		got := h.Due(s.queues, s.at, every)
		if !slices.Equal(got, s.want) {
			t.Fatalf("%s: Due = %v, want %v", s.name, got, s.want)
		}
		if s.failed {
			h.Failed(got)
		}
	}
}
