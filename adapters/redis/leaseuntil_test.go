package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
)

// TestLeaseUntilNotAfterServerLeaseEnd checks the promise of Claim.LeaseUntil against the
// lease end the scripts store (the lease set's score, in the server's ms): nobody else gets
// the batch before LeaseUntil, so LeaseUntil must never be after that end, for a claim and for
// an extension, with leases of whole and of fractional milliseconds. A LeaseUntil counted as
// start + lease on this machine's clock is up to a millisecond late: the server truncates its
// TIME to the millisecond.
func TestLeaseUntilNotAfterServerLeaseEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newTestBackend(t, "", nil)
	rc := goredis.NewClient(testRedisOptions(t))
	t.Cleanup(func() { _ = rc.Close() })
	const q, n = "q", 40
	publishN(t, be, q, n)
	leaseKey := be.keys.keys(q).script[2]
	serverEnd := func(c *core.Claim) time.Time {
		t.Helper()
		ms, err := rc.ZScore(ctx, leaseKey, c.ID).Result()
		if err != nil {
			t.Fatalf("ZSCORE %s %s: %v", leaseKey, c.ID, err)
		}
		return time.UnixMilli(int64(ms))
	}
	check := func(what string, c *core.Claim) {
		t.Helper()
		if end := serverEnd(c); c.LeaseUntil.After(end) {
			t.Errorf("%s %s: LeaseUntil %s is %v after the lease end the server stored (%s)",
				what, c.ID, c.LeaseUntil.Format(time.RFC3339Nano), c.LeaseUntil.Sub(end), end.Format(time.RFC3339Nano))
		}
	}
	leases := []time.Duration{10 * time.Second, 10*time.Second + 700*time.Microsecond}
	for i := range n {
		lease := leases[i%len(leases)]
		cs := fetchLease(t, be, lease, one(q))
		if len(cs) != 1 {
			t.Fatalf("claim %d: got %d claims, want 1", i, len(cs))
		}
		c := cs[0]
		check(fmt.Sprintf("claim (lease %v)", lease), c)
		ext := 20*time.Second + time.Duration(i%2)*300*time.Microsecond
		must(t, be.Extend(ctx, c, ext))
		check(fmt.Sprintf("extension (lease %v)", ext), c)
	}
}
