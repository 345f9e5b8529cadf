package nats

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/nats/natstest"
)

// TestServerNowNeverBehind: the server-clock estimate a schedule is computed from is never
// behind the server's clock (here the same machine's, so time.Now() before the call is a
// lower bound), and stays within a round trip plus the drift allowance of it, on the first
// reading and on the cached ones.
func TestServerNowNeverBehind(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natstest.NATSURL(t), nil)
	ctx := context.Background()
	q, err := be.queue(ctx, "publish", "clockq")
	if err != nil {
		t.Fatalf("queue: %v", err)
	}
	for i := range 3 {
		before := time.Now()
		got, err := be.serverNow(ctx, q)
		after := time.Now()
		if err != nil {
			t.Fatalf("serverNow: %v", err)
		}
		if got.Before(before) {
			t.Fatalf("reading %d: server now estimated %v behind the server's clock: a schedule would fire early", i, before.Sub(got))
		}
		if ahead := got.Sub(after); ahead > time.Second {
			t.Fatalf("reading %d: server now estimated %v ahead", i, ahead)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
