package memory

import (
	"context"
	"testing"
	"time"
)

// TestDepthOldestReady: OldestReady is when the longest-waiting ready batch became claimable
// (publish, due time, lease end); delayed and in-flight batches do not count.
func TestDepthOldestReady(t *testing.T) {
	t.Parallel()
	be, clk := newFake(t)
	t0 := clk.Now()
	oldest := func() time.Time {
		t.Helper()
		d, err := be.Depths(context.Background(), []string{"q"})
		if err != nil {
			t.Fatalf("depths: %v", err)
		}
		if got := d["q"]; got.OldestReady.IsZero() != (got.Ready == 0) {
			t.Fatalf("depth %+v: OldestReady must be set exactly when batches are ready", got)
		}
		return d["q"].OldestReady
	}
	if o := oldest(); !o.IsZero() {
		t.Fatalf("empty queue: OldestReady = %v, want zero", o)
	}
	publish(t, be, "q", "later", t0.Add(time.Minute))
	if o := oldest(); !o.IsZero() {
		t.Fatalf("only a delayed batch: OldestReady = %v, want zero", o)
	}
	publish(t, be, "q", "now", time.Time{})
	clk.Advance(10 * time.Second)
	if o := oldest(); !o.Equal(t0) {
		t.Fatalf("one ready batch published at t0: OldestReady = %v, want %v", o, t0)
	}
	if age := clk.Now().Sub(oldest()); age != 10*time.Second {
		t.Fatalf("age after 10 s = %v, want 10s", age)
	}
	clk.Advance(time.Minute) // the delayed batch is due at t0+1m; the first stays the oldest
	if o := oldest(); !o.Equal(t0) {
		t.Fatalf("after the delayed one came due: OldestReady = %v, want %v", o, t0)
	}
	if cs := fetch(t, be, all("q")); len(cs) != 2 {
		t.Fatalf("claimed %d, want 2", len(cs))
	}
	if o := oldest(); !o.IsZero() {
		t.Fatalf("every batch in flight: OldestReady = %v, want zero", o)
	}
	leaseEnd := clk.Now().Add(10 * time.Second)
	clk.Advance(30 * time.Second)
	if o := oldest(); !o.Equal(leaseEnd) {
		t.Fatalf("leases ran out: OldestReady = %v, want the lease end %v", o, leaseEnd)
	}
}
