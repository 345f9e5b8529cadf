package txmqtest

import (
	"testing"
	"time"
)

// TestOrderingRunP: nearest-rank quantiles of the pickups.
func TestOrderingRunP(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted on purpose
	}
	cases := []struct {
		name    string
		pickups []time.Duration
		q       float64
		want    time.Duration
	}{
		{"empty", nil, 0.99, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"p99 of 100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p50 of 100", ms(hundred...), 0.5, 50 * time.Millisecond},
		{"max", ms(3, 1, 2), 1, 3 * time.Millisecond},
	}
	for _, c := range cases {
		if got := (OrderingRun{Pickups: c.pickups}).P(c.q); got != c.want {
			t.Errorf("%s: P(%v) = %v; want %v", c.name, c.q, got, c.want)
		}
	}
}
