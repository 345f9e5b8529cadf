package drain_test

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/txmqtest"
)

// fixedDepth reports d for every queue; the rest is its embedded backend's.
type fixedDepth struct {
	core.Backend
	d core.Depth
}

func (f *fixedDepth) Depths(_ context.Context, queues []string) (map[string]core.Depth, error) {
	out := make(map[string]core.Depth, len(queues))
	for _, q := range queues {
		out[q] = f.d
	}
	return out, nil
}

// TestDepthsOldestReadyIsTheEarliest: the drain backend's OldestReady is the earliest non-zero
// one of the primary and the old backends.
func TestDepthsOldestReadyIsTheEarliest(t *testing.T) {
	t.Parallel()
	t1 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Minute)
	ready := func(at time.Time) core.Depth {
		if at.IsZero() {
			return core.Depth{}
		}
		return core.Depth{Ready: 1, OldestReady: at}
	}
	tests := []struct {
		name               string
		primary, old, old2 time.Time
		want               time.Time
	}{
		{"old earlier", t2, t1, time.Time{}, t1},
		{"primary earlier", t1, t2, t2, t1},
		{"primary none", time.Time{}, t2, t1, t1},
		{"olds none", t2, time.Time{}, time.Time{}, t2},
		{"none anywhere", time.Time{}, time.Time{}, time.Time{}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := drain.New(&fixedDepth{Backend: newMemory(t), d: ready(tt.primary)},
				[]core.Backend{&fixedDepth{Backend: newMemory(t), d: ready(tt.old)}, &fixedDepth{Backend: newMemory(t), d: ready(tt.old2)}},
				&drain.Options{Logger: txmqtest.DiscardLogger()})
			t.Cleanup(func() { _ = d.Close() })
			got, err := d.Depths(context.Background(), []string{"q"})
			if err != nil {
				t.Fatal(err)
			}
			if !got["q"].OldestReady.Equal(tt.want) {
				t.Fatalf("OldestReady = %v, want %v", got["q"].OldestReady, tt.want)
			}
		})
	}
}
