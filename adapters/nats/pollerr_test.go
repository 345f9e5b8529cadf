package nats

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
)

// setPollErrs gives every lane of queue (the main one and each key partition) a failed
// poll's error, sent on the connection's current epoch, as an outage leaves them; it returns
// how many lanes it set.
func setPollErrs(t *testing.T, be *Backend, queue string) int {
	t.Helper()
	be.mu.Lock()
	defer be.mu.Unlock()
	q, ok := be.queues[queue]
	if !ok {
		t.Fatalf("queue %q not set up", queue)
	}
	epoch := be.connEpoch()
	lanes := q.lanes()
	for _, l := range lanes {
		l.pollErr, l.pollErrConn = wrap("fetch: pull of consumer "+l.consumer, queue, errors.New("injected poll failure")), epoch
	}
	return len(lanes)
}

// TestPollErrorsAfterOutage: after an outage every lane of an ordered queue holds its last
// pull's error. A Fetch returns one of them and clears them all (they were returned one per
// Fetch, each costing the driver a backoff: nine lanes kept a node from fetching for 20 s
// after the connection was back), and a Fetch after the connection was re-established
// returns none of the errors of pulls sent before.
func TestPollErrorsAfterOutage(t *testing.T) {
	t.Parallel()
	be := openBackend(t, natstest.NATSURL(t), nil)
	const q = "ordered"
	slots := core.QueueSlots{Queue: q, Free: 10, Ordered: true}
	lease := 10 * time.Second
	fetchWait(t, be, 0, lease, slots) // sets the queue and its lanes up
	fetch := func() error {
		_, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n1", Queues: []core.QueueSlots{slots}, Lease: lease})
		return err
	}

	if n := setPollErrs(t, be, q); n < 2 {
		t.Fatalf("an ordered queue has %d lanes; the test needs several", n)
	}
	if err := fetch(); err == nil || !strings.Contains(err.Error(), "injected poll failure") {
		t.Fatalf("first Fetch after the lanes failed: %v; want one lane's error", err)
	}
	if err := fetch(); err != nil {
		t.Fatalf("second Fetch: %v; want nil: the first Fetch takes every lane's error", err)
	}

	setPollErrs(t, be, q)
	reconnects := be.nc.Stats().Reconnects
	if err := be.nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "reconnected", func() bool { return be.nc.Stats().Reconnects > reconnects && be.nc.IsConnected() })
	if err := fetch(); err != nil {
		t.Fatalf("Fetch after the connection was re-established: %v; want nil (the errors are from before)", err)
	}
}
