package sqs

import (
	"testing"
	"time"
)

// TestLeaseEnd: a claim's LeaseUntil ends before the server's visibility deadline by a tenth
// of the timeout, at most maxLeaseMargin, so that a server whose clock releases a message a
// little early never hands out a batch this client still counts as held.
func TestLeaseEnd(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		vis  int32
		want time.Duration
	}{
		{1, 900 * time.Millisecond},
		{2, 1800 * time.Millisecond},
		{3, 2800 * time.Millisecond},
		{30, 29800 * time.Millisecond},
		{43200, 43200*time.Second - maxLeaseMargin},
	} {
		if got := leaseEnd(from, tc.vis).Sub(from); got != tc.want {
			t.Errorf("leaseEnd(vis %d s) = from + %v, want from + %v", tc.vis, got, tc.want)
		}
		if deadline := from.Add(time.Duration(tc.vis) * time.Second); !leaseEnd(from, tc.vis).Before(deadline) {
			t.Errorf("leaseEnd(vis %d s) is not before the server's deadline %v", tc.vis, deadline)
		}
	}
}
