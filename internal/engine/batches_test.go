package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// manyDueTimes returns n pendings of one queue, each with its own due time.
func manyDueTimes(n int, t0 time.Time) []*core.Pending {
	spec := &Spec{Name: "q", MaxBatch: 100}
	ps := make([]*core.Pending, n)
	for i := range ps {
		ps[i] = &core.Pending{Queue: "q", Batcher: &pendingMeta{spec: spec}, NotBefore: t0.Add(time.Duration(i) * time.Microsecond),
			Messages: []core.Message{{ID: "m", Body: []byte("1")}}}
	}
	return ps
}

// TestBatchesManyDueTimes: a burst of delayed publishes, each with its own due time, is cut into
// one batch per due time, in due order. (That it takes linear time is measured by
// BenchmarkBatchesManyDueTimes: 1k and 10k pendings should differ by about 10x, not 100x.)
func TestBatchesManyDueTimes(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	ps := manyDueTimes(30000, t0)
	bs, err := core.Batches(ps, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != len(ps) {
		t.Fatalf("%d batches, want %d", len(bs), len(ps))
	}
	for i := 1; i < len(bs); i++ {
		if bs[i].NotBefore.Before(bs[i-1].NotBefore) {
			t.Fatal("batches not in due order")
		}
	}
}

// BenchmarkBatchesManyDueTimes cuts bursts of pendings with distinct due times; the ns/op of the
// two sizes should grow linearly (10x), which a quadratic grouping would make 100x.
func BenchmarkBatchesManyDueTimes(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			t0 := time.Now()
			ps := manyDueTimes(n, t0)
			for b.Loop() {
				if _, err := core.Batches(ps, t0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
