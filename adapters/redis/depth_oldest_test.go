package redis

import (
	"context"
	"testing"
	"time"
)

// TestDepthOldestReady: OldestReady is the due time of the longest-waiting ready batch (a
// lease end once a lease ran out), on the server's clock; delayed and in-flight batches do not
// count, and the age it gives grows while the batch waits.
func TestDepthOldestReady(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	const skew = time.Second // the server's clock against ours (same machine) and call latency
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
	within := func(what string, got, lo, hi time.Time) {
		t.Helper()
		if got.Before(lo.Add(-skew)) || got.After(hi.Add(skew)) {
			t.Fatalf("%s: OldestReady = %v, want within [%v, %v] (±%v)", what, got, lo, hi, skew)
		}
	}
	if o := oldest(); !o.IsZero() {
		t.Fatalf("empty queue: OldestReady = %v, want zero", o)
	}
	publish(t, be, "q", "later", time.Now().Add(time.Hour))
	if o := oldest(); !o.IsZero() {
		t.Fatalf("only a delayed batch: OldestReady = %v, want zero", o)
	}
	before := time.Now()
	publish(t, be, "q", "now", time.Time{})
	after := time.Now()
	first := oldest()
	within("one ready batch", first, before, after)
	time.Sleep(300 * time.Millisecond)
	if o := oldest(); !o.Equal(first) {
		t.Fatalf("OldestReady moved from %v to %v while the batch waited", first, o)
	}
	if age := time.Since(first); age < 300*time.Millisecond-skew/2 {
		t.Fatalf("age after 300 ms of waiting = %v", age)
	}
	if cs := fetch(t, be, all("q")); len(cs) != 1 {
		t.Fatalf("claimed %d, want 1 (the delayed one is not due)", len(cs))
	}
	if o := oldest(); !o.IsZero() {
		t.Fatalf("the ready batch in flight, the other delayed: OldestReady = %v, want zero", o)
	}
	publish(t, be, "q", "second", time.Time{})
	cs := fetchLease(t, be, time.Second, all("q"))
	if len(cs) != 1 {
		t.Fatalf("claimed %d, want 1", len(cs))
	}
	time.Sleep(1500 * time.Millisecond)
	within("after the 1 s lease ran out", oldest(), cs[0].LeaseUntil, cs[0].LeaseUntil)
}
