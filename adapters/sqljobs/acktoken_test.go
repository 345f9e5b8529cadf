package sqljobs

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestAckNeedsTheRowsOwnToken: the grouped Ack deletes a row whose id is among the group's
// ids and whose token is among its tokens (sqlAck), which is the pairwise check only while
// every row a claim statement leases gets a token of its own. Acks naming the rows of one
// claim statement with the tokens of other rows of that statement must delete nothing,
// alone or grouped with valid Acks; and every claim's token differs from every other's.
func TestAckNeedsTheRowsOwnToken(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	const n = 40
	publishN(t, be, "tok", n)
	cs := fetch(t, be, time.Minute, core.QueueSlots{Queue: "tok", Free: n})
	if len(cs) != n {
		t.Fatalf("claimed %d batches in one fetch, want %d", len(cs), n)
	}
	seen := map[int64]string{}
	for _, c := range cs {
		h := c.Handle.(*handle)
		if other, dup := seen[h.token]; dup {
			t.Fatalf("batches %s and %s of one claim statement got the same lease token %d", other, c.ID, h.token)
		}
		seen[h.token] = c.ID
	}
	// Forged: the second half's ids with the first half's tokens, sent together with the first
	// half's valid Acks so that they may share a statement.
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, c := range cs {
		target := c
		if i >= n/2 {
			hv, hf := c.Handle.(*handle), cs[i-n/2].Handle.(*handle)
			forged := *c
			forged.Handle = &handle{be: be, id: hv.id, token: hf.token, queue: hv.queue}
			target = &forged
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = be.Ack(ctxT(t), target)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case i < n/2 && err != nil:
			t.Errorf("valid Ack of %s: %v", cs[i].ID, err)
		case i >= n/2 && !errors.Is(err, core.ErrLeaseLost):
			t.Errorf("Ack of %s with another row's token: %v, want ErrLeaseLost", cs[i].ID, err)
		}
	}
	if d := depth(t, be, "tok"); d.InFlight != n/2 || d.Ready != 0 {
		t.Fatalf("after the Acks: %+v, want the %d batches acked with a wrong token still in flight", d, n/2)
	}
	// The survivors are acked with their own tokens.
	for _, c := range cs[n/2:] {
		if err := be.Ack(ctxT(t), c); err != nil {
			t.Fatalf("Ack of %s with its own token: %v", c.ID, err)
		}
	}
	if d := depth(t, be, "tok"); d != (core.Depth{}) {
		t.Fatalf("after every Ack: %+v, want an empty queue", d)
	}
}
