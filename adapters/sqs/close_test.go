package sqs

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestCloseEndsLongPollWithoutSpendingARun: Close while idle long polls (20 s) are
// outstanding, on a standard and on an Exclusive (FIFO) queue, while another client polls the
// same queue, with nothing published or with a batch published at the same moment. SQS (and
// fauxqs) keep serving a receive whose client went away, so cutting the poll could hide that
// batch for its visibility timeout and bring it back with a receive count one higher, a run
// spent that never ran. Close instead ends the polls with wake messages: it returns in well
// under the long-poll wait, the batch reaches the other client with Deliveries 1, and no wake
// is ever handed out or left in the queue.
func TestCloseEndsLongPollWithoutSpendingARun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		exclusive, publish bool
	}{
		{"standard/idle", false, false}, {"standard/publish", false, true},
		{"exclusive/idle", true, false}, {"exclusive/publish", true, true},
	} {
		exclusive := tc.exclusive
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSpace(t)
			a, b, pub := s.client(t, nil), s.client(t, nil), s.client(t, nil)
			slots := []core.QueueSlots{{Queue: "cut", Free: 1, Exclusive: exclusive}}
			r := core.FetchRequest{Node: "n", Lease: 2 * time.Second, Wait: 5 * time.Second, Queues: slots}
			mustPublish(t, pub, batch("cut", exclusive, "warm")) // the queues exist before a polls
			for _, c := range fetchAll(t, b, r, 1, 10*time.Second) {
				_ = b.Ack(context.Background(), c)
			}
			cancelled, cancel := context.WithCancel(context.Background())
			cancel() // each Fetch returns at once, its idle long poll (20 s) outstanding
			for _, c := range []*Backend{a, b} {
				if _, err := c.Fetch(cancelled, r); err != nil {
					t.Fatalf("Fetch: %v", err)
				}
			}
			for deadline := time.Now().Add(10 * time.Second); a.Requests()["ReceiveMessage"] == 0; {
				if time.Now().After(deadline) {
					t.Fatal("a's long poll was never sent")
				}
				time.Sleep(10 * time.Millisecond) // until a's receive is on the wire
			}
			closed := make(chan time.Duration, 1)
			go func() {
				start := time.Now()
				if err := a.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				closed <- time.Since(start)
			}()
			var x core.OutgoingBatch
			if tc.publish {
				x = batch("cut", exclusive, "x")
				mustPublish(t, pub, x) // may reach a's receive: a gives it back uncounted
			}
			if took := <-closed; took > 5*time.Second {
				t.Fatalf("Close took %v with an idle long poll outstanding; want well under its 20 s wait", took)
			}
			if tc.publish {
				cs := fetchAll(t, b, r, 1, 10*time.Second)
				if len(cs) != 1 || cs[0].ID != x.ID || cs[0].Deliveries != 1 {
					for _, c := range cs {
						t.Logf("claim %s, Deliveries %d", c.ID, c.Deliveries)
					}
					t.Fatalf("after a closed: %d claims; want batch %s once, with Deliveries 1", len(cs), x.ID)
				}
				if err := b.Ack(context.Background(), cs[0]); err != nil {
					t.Fatal(err)
				}
			}
			if n := a.Requests()["SendMessage"]; !tc.publish && n == 0 {
				t.Error("Close sent no wake message")
			}
			// No wake left behind: nothing more is handed out, and the queue is empty (fauxqs's
			// counts are exact).
			if more := fetchAll(t, b, core.FetchRequest{Node: "n", Lease: 2 * time.Second, Wait: time.Second, Queues: slots}, 1, 2*time.Second); len(more) > 0 {
				t.Fatalf("after Close (and the batch, if any, was acked): %d more claims (%s)", len(more), more[0].ID)
			}
			if d := depthOf(t, b, "cut"); d != (core.Depth{}) {
				t.Fatalf("depth after everything was acked: %+v; want zeros (a wake left in the queue?)", d)
			}
		})
	}
}

// depthOf returns be's depth of queue.
func depthOf(t *testing.T, be *Backend, queue string) core.Depth {
	t.Helper()
	d, err := be.Depths(context.Background(), []string{queue})
	if err != nil {
		t.Fatalf("Depths: %v", err)
	}
	return d[queue]
}
