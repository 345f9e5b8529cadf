package core

import (
	"testing"
	"time"
)

// TestBatchesManyDueTimes: a burst of delayed publishes, each with its own due time, is cut into
// batches in linear time.
func TestBatchesManyDueTimes(t *testing.T) {
	t.Parallel()
	spec := &queueSpec{name: "q", maxBatch: 100}
	t0 := time.Now()
	ps := make([]*Pending, 30000)
	for i := range ps {
		ps[i] = &Pending{Queue: "q", spec: spec, NotBefore: t0.Add(time.Duration(i) * time.Microsecond),
			Messages: []Message{{ID: "m", Body: []byte("1")}}}
	}
	start := time.Now()
	bs, err := Batches(ps, t0)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Batches of %d pendings with distinct due times took %v", len(ps), took)
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
