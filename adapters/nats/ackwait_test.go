package nats

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/nats/natstest"
)

// Nodes with different leases share a queue's consumer, whose AckWait the first one set. A
// node whose lease is longer than that AckWait extends on its own lease's schedule (core ticks
// every sixth of its lease), so its claims must hold at least its lease, from Fetch and from
// Extend, or they are redelivered to another node while they run.
func TestLongerLeaseThanConsumerAckWait(t *testing.T) {
	t.Parallel()
	short, long := 300*time.Millisecond, 3*time.Second
	a := openBackend(t, natstest.NATSURL(t), nil)
	b, c := sibling(t, a), sibling(t, a)
	fetchWait(t, a, 0, short, one("q")) // a creates the consumer with its lease
	publish(t, a, "q", "b1", time.Time{})
	claim := fetchN(t, b, 1, long, one("q"))[0]
	if left := time.Until(claim.LeaseUntil); left < long*2/3 {
		t.Fatalf("a claim fetched with a %v lease holds %v", long, left)
	}
	time.Sleep(long / 4)
	if cs := fetchWait(t, c, 0, long, one("q")); len(cs) != 0 {
		t.Fatalf("the batch was handed out again %v into a %v lease", long/4, long)
	}
	if err := b.Extend(context.Background(), claim, long); err != nil {
		t.Fatalf("extend: %v", err)
	}
	if left := time.Until(claim.LeaseUntil); left < long*2/3 {
		t.Fatalf("extended by %v, the claim holds %v", long, left)
	}
	if err := b.Ack(context.Background(), claim); err != nil {
		t.Fatalf("ack: %v", err)
	}
}

// An explicit Options.AckWait lower than the consumer's must not shorten the leases another
// client already holds (and reports to its node): their batches would run twice at once.
func TestExplicitAckWaitNeverShortensHeldLeases(t *testing.T) {
	t.Parallel()
	long := 3 * time.Second
	a := openBackend(t, natstest.NATSURL(t), &Options{AckWait: long})
	o := a.opts
	o.AckWait = 300 * time.Millisecond
	b := openBackend(t, natstest.NATSURL(t), &o)
	publish(t, a, "q", "b1", time.Time{})
	claim := fetchN(t, a, 1, long, one("q"))[0]
	fetchWait(t, b, 0, o.AckWait, one("q")) // b looks the consumer up with its own AckWait
	time.Sleep(long / 4)
	if cs := fetchWait(t, b, 0, o.AckWait, one("q")); len(cs) != 0 {
		t.Fatalf("the batch was handed out again while a holds it until %v", time.Until(claim.LeaseUntil))
	}
	if err := a.Ack(context.Background(), claim); err != nil {
		t.Fatalf("ack: %v", err)
	}
}
