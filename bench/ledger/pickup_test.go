package ledger_test

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkLedgerPickup measures pickup latency, from the start of a Publish call to the start
// of the listener run that gets the message, on an idle queue (one message at a time, each
// published once the previous one's run started), on SQL jobs and on Redis, with the ledger
// off, on, and on in ledger mode in turn. It reports each variant's p50 and p99 in
// milliseconds and the ratios on/off and mode/off of this one run. b.N counts messages per
// variant: run it once with a fixed count,
//
//	go test -run '^$' -bench LedgerPickup -benchtime 300x ./ledger
func BenchmarkLedgerPickup(b *testing.B) {
	for _, backend := range benchBackends {
		b.Run(backend, func(b *testing.B) {
			p50, p99 := map[string]float64{}, map[string]float64{}
			for _, v := range benchVariants {
				lat := benchPickup(b, backend, v)
				p50[v], p99[v] = percentileMS(lat, 0.50), percentileMS(lat, 0.99)
				b.ReportMetric(p50[v], v+"-p50-ms")
				b.ReportMetric(p99[v], v+"-p99-ms")
			}
			for _, v := range benchVariants[1:] {
				if p50["off"] > 0 && p99["off"] > 0 {
					b.ReportMetric(p50[v]/p50["off"], v+"/off-p50")
					b.ReportMetric(p99[v]/p99["off"], v+"/off-p99")
				}
			}
		})
	}
}

// benchPickup publishes b.N messages one at a time with one variant and returns each one's
// pickup latency.
func benchPickup(b *testing.B, backend, variant string) []time.Duration {
	b.StopTimer()
	r := newBenchRig(b, backend, variant)
	defer r.close()
	ctx := context.Background()
	seen := map[string]bool{}
	lat := make([]time.Duration, 0, b.N)
	b.StartTimer()
	for i := range b.N {
		start := time.Now()
		if err := r.q.Publish(ctx, r.n, benchMsg{ID: i, Email: "someone@example.com"}); err != nil {
			b.Fatal(err)
		}
		timeout := time.After(time.Minute)
	wait:
		for {
			select {
			case run := <-r.runs:
				fresh := false
				for _, id := range run.ids {
					fresh = fresh || !seen[id]
					seen[id] = true
				}
				if fresh { // not a batch run again
					lat = append(lat, run.at.Sub(start))
					break wait
				}
			case <-timeout:
				b.Fatalf("message %d of %d not picked up within 1m", i+1, b.N)
			}
		}
	}
	b.StopTimer()
	r.settled(b, b.N)
	return lat
}

// percentileMS returns the p-th quantile (0..1, nearest rank) of lat in milliseconds.
func percentileMS(lat []time.Duration, p float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	i := min(len(s)-1, max(0, int(p*float64(len(s))+0.5)-1))
	return float64(s[i]) / float64(time.Millisecond)
}

func TestPercentileMS(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		name string
		lat  []time.Duration
		p    float64
		want float64
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7},
		{"median of odd", ms(3, 1, 2), 0.5, 2},
		{"median of even takes the lower", ms(4, 1, 3, 2), 0.5, 2},
		{"p99 of 100 is the 99th", ms(func() []int {
			v := make([]int, 100)
			for i := range v {
				v[i] = 100 - i
			}
			return v
		}()...), 0.99, 99},
		{"p0 is the least", ms(5, 9), 0, 5},
	} {
		if got := percentileMS(tc.lat, tc.p); got != tc.want {
			t.Errorf("%s: percentileMS(%v, %v) = %v, want %v", tc.name, tc.lat, tc.p, got, tc.want)
		}
	}
}
