package parity

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// Caller ids that deduplicate (txmq.QueueConfig.IDDedupWindow, core.IDDeduper). On an adapter
// without the capability the properties assert that a node refuses such a queue and are
// counted "not supported by the adapter", never as passed.

func init() {
	register("identity",
		property{name: "ids_dedup_within_window", run: idsDedupWindow},
		property{name: "ids_dedup_through_outbox", run: idsDedupOutbox},
	)
}

// dedupWindow is the properties' IDDedupWindow: short enough to wait out, long enough that
// the repeats published right after the first delivery fall well inside it on a loaded
// machine.
const dedupWindow = 8 * time.Second

// dedupLongWindow is the window of the property that never waits for one to end (or the
// adapter's longest, if shorter): long enough
// that no step of it, however slow a loaded machine is, outlives the window and makes a repeat
// a new publish.
const dedupLongWindow = 10 * time.Minute

// needDedup ends a property on an adapter that cannot deduplicate ids, after checking that a
// node refuses a queue asking for it; counted as not supported.
func (x *X) needDedup() {
	x.T.Helper()
	sup, err := core.DedupsIDs(x.rawClient())
	if err == nil && (sup.MaxWindow == 0 || sup.MaxWindow >= dedupWindow) {
		return
	}
	if err == nil {
		err = fmt.Errorf("the backend keeps ids at most %v, the property needs %v", sup.MaxWindow, dedupWindow)
	} else {
		q := declare(x, txmq.QueueConfig[Msg]{IDDedupWindow: dedupWindow})
		c, _ := x.client()
		_, nerr := txmq.NewNode(c, &txmq.NodeOptions{Registry: x.Registry, Logger: x.logger})
		if nerr == nil || !errors.Is(nerr, core.ErrInvalidConfig) || !strings.Contains(nerr.Error(), q.Name()) {
			x.T.Fatalf("NewNode with queue %q (IDDedupWindow) on adapter %s that cannot deduplicate ids: %v; want ErrInvalidConfig naming the queue", q.Name(), x.h.Name(), nerr)
		}
	}
	x.unsupported.Store(true)
	x.T.Skipf("parity[%s]: not supported by the adapter: %v", x.h.Name(), err)
}

// idCopies records, per message id, the copies (Msg.K) that reached a listener and how often
// each did. The properties' nodes hold a lease far longer than they run, so a copy seen twice
// was stored twice (a re-published batch), not redelivered.
type idCopies struct {
	mu   sync.Mutex
	seen map[string]map[string]int
}

// dedupLease is the properties' node lease: no redelivery within their run.
const dedupLease = 30 * time.Second

func (c *idCopies) listen(x *X, q *txmq.Queue[Msg], n *txmq.Node) {
	x.T.Helper()
	err := q.Listen(n, func(ctx context.Context, msgs []Msg) error {
		ids := txmq.MessageIDs(ctx)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.seen == nil {
			c.seen = map[string]map[string]int{}
		}
		for i, m := range msgs {
			id := "?"
			if i < len(ids) {
				id = ids[i]
			}
			id = q.Name() + "/" + id
			if c.seen[id] == nil {
				c.seen[id] = map[string]int{}
			}
			c.seen[id][m.K]++
		}
		return nil
	})
	if err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
}

// copies returns the copies of queue q's message id, sorted.
func (c *idCopies) copies(q *txmq.Queue[Msg], id string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k := range c.seen[q.Name()+"/"+id] {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// expect fails unless each id of q reached the listener in exactly want copies, each once.
func (c *idCopies) expect(x *X, q *txmq.Queue[Msg], want int, ids ...string) {
	x.T.Helper()
	for _, id := range ids {
		if got := c.copies(q, id); len(got) != want {
			x.T.Errorf("queue %q, id %q: %d copies delivered (%q), want %d", q.Name(), id, len(got), got, want)
		}
		c.mu.Lock()
		for k, runs := range c.seen[q.Name()+"/"+id] {
			if runs != 1 {
				x.T.Errorf("queue %q, id %q: copy %s delivered %d times (stored again), want once", q.Name(), id, k, runs)
			}
		}
		c.mu.Unlock()
	}
}

// idsDedupWindow: on a queue with an IDDedupWindow, an id published again within the window
// (from another node, and beside a new id in one call) is delivered once; a different id, the
// same id on a queue without a window, and generated ids are delivered; the same id after the
// window is delivered again.
func idsDedupWindow(x *X) {
	x.needDedup()
	q := declare(x, txmq.QueueConfig[Msg]{IDDedupWindow: dedupWindow})
	plain := declare(x, txmq.QueueConfig[Msg]{})
	a, b := x.node(txmq.NodeOptions{Lease: dedupLease}), x.node(txmq.NodeOptions{Lease: dedupLease})
	var c idCopies
	c.listen(x, q, a)
	c.listen(x, plain, a)
	ctx := context.Background()
	pub := func(n *txmq.Node, q *txmq.Queue[Msg], ks []string, opts ...txmq.PublishOption) {
		x.T.Helper()
		msgs := make([]Msg, len(ks))
		for i, k := range ks {
			msgs[i] = Msg{K: k}
		}
		if err := q.PublishMany(ctx, n, msgs, opts...); err != nil {
			x.T.Fatalf("PublishMany %q: %v", ks, err)
		}
	}
	has := func(q *txmq.Queue[Msg], id string, n int) func() bool {
		return func() bool { return len(c.copies(q, id)) >= n }
	}
	pub(a, q, []string{"x#1"}, txmq.ID("x"))
	x.eventually(has(q, "x", 1), "the first copy of id x delivered")
	firstSeen := time.Now() // x#1 was stored before this: its window ends before firstSeen+window

	pub(b, q, []string{"x#2"}, txmq.ID("x"))              // another node, another call
	pub(a, q, []string{"x#3", "y#1"}, txmq.IDs("x", "y")) // a repeat beside a new id
	pub(a, q, []string{"y#2", "x#4"}, txmq.IDs("y", "x")) // both repeats, one flush
	pub(a, q, []string{"g#1", "g#2"})                     // generated ids
	pub(b, plain, []string{"x#p1"}, txmq.ID("x"))         // same id, queue without window
	pub(b, plain, []string{"x#p2"}, txmq.ID("x"))         // ... delivered twice
	x.eventually(func() bool {
		st := a.Stats()
		return has(q, "y", 1)() && has(plain, "x", 2)() && st.Buffered == 0 && b.Stats().Buffered == 0
	}, "id y, the plain queue's copies and the generated ids delivered")
	sleep(500 * time.Millisecond) // give a wrong second copy the chance to show
	x.idle(a, b)
	if el := time.Since(firstSeen); el > dedupWindow/2 {
		x.T.Fatalf("the repeats took %v after the first delivery: too slow to judge a %v window", el, dedupWindow)
	}
	c.expect(x, q, 1, "x", "y")
	c.expect(x, plain, 2, "x")
	gen := 0
	c.mu.Lock()
	for id, ks := range c.seen {
		if strings.HasPrefix(id, q.Name()+"/") && (ks["g#1"] > 0 || ks["g#2"] > 0) {
			gen += len(ks)
		}
	}
	c.mu.Unlock()
	if gen != 2 {
		x.T.Fatalf("generated ids: %d of 2 messages delivered", gen)
	}

	// After the window the id is new again.
	time.Sleep(time.Until(firstSeen.Add(dedupWindow + 2*time.Second)))
	pub(b, q, []string{"x#5"}, txmq.ID("x"))
	x.eventually(has(q, "x", 2), "id x published again after the window delivered")
	x.idle(a, b)
	if got := c.copies(q, "x"); len(got) != 2 || got[1] != "x#5" {
		x.T.Fatalf("id x: copies %q, want the first one and x#5", got)
	}
}

// lostReply is a client whose Publish stores the batch and then reports the backend
// unavailable, as when the reply is lost: the outbox keeps the row and publishes it again.
type lostReply struct{ core.Backend }

func (l lostReply) Publish(ctx context.Context, b core.OutgoingBatch) error {
	if err := l.Backend.Publish(ctx, b); err != nil {
		return err
	}
	return fmt.Errorf("parity: the reply of a stored publish was lost: %w", core.ErrBackendUnavailable)
}

// Unwrap exposes the client's capabilities.
func (l lostReply) Unwrap() core.Backend { return l.Backend }

// idsDedupOutbox: an id published in a transaction whose outbox row is published, not
// deleted (the reply was lost) and published again by the recovery sweep, is delivered once;
// so is the same id published again directly and in a second transaction.
func idsDedupOutbox(x *X) {
	x.needDedup()
	window := dedupLongWindow
	if sup, err := core.DedupsIDs(x.rawClient()); err == nil && sup.MaxWindow > 0 {
		window = min(window, sup.MaxWindow)
	}
	q := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Try, IDDedupWindow: window, MaxBatchMessages: 3})
	n := x.node(txmq.NodeOptions{Lease: dedupLease})
	var c idCopies
	c.listen(x, q, n)
	lost := x.store(lostReply{x.rawClient()}, outbox.Options{})
	ids := []string{"o1", "o2", "o3", "o4", "o5"}
	first := make([]Msg, len(ids))
	for i, id := range ids {
		first[i] = Msg{K: id + "#tx1"}
	}
	if err := runInTx(x.ctx(), lost, func(ctx context.Context) error {
		return q.PublishMany(ctx, n, first, txmq.IDs(ids...))
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	waitStoreIdle(x, lost)
	if r := outboxRows(x, lost); r == 0 {
		x.T.Fatalf("no outbox rows left after a publish whose reply was lost")
	}
	live := x.sameSchemaStore(lost, x.rawClient(), outbox.Options{RecoveryAge: 100 * time.Millisecond})
	x.eventually(func() bool {
		if _, err := live.SweepOnce(x.ctx()); err != nil {
			x.T.Logf("SweepOnce: %v", err)
		}
		return outboxRows(x, live) == 0
	}, "the sweep publishes the rows again (same ids) and deletes them")
	x.eventually(func() bool {
		for _, id := range ids {
			if len(c.copies(q, id)) == 0 {
				return false
			}
		}
		return true
	}, "the transaction's messages delivered (the first row before the sweep, the rest by it)")
	if err := runInTx(x.ctx(), live, func(ctx context.Context) error {
		return q.Publish(ctx, n, Msg{K: "o1#tx2"}, txmq.ID("o1"))
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	if err := q.Publish(context.Background(), n, Msg{K: "o2#direct"}, txmq.ID("o2")); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	if err := q.Publish(context.Background(), n, Msg{K: "o6#direct"}, txmq.ID("o6")); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	x.eventually(func() bool {
		// The second transaction's row goes by its after-commit publish, or (a publish that
		// timed out on a loaded machine) by the sweep: either way its id is a repeat.
		if outboxRows(x, live) > 0 {
			if _, err := live.SweepOnce(x.ctx()); err != nil {
				x.T.Logf("SweepOnce: %v", err)
			}
		}
		return len(c.copies(q, "o6")) == 1 && outboxRows(x, live) == 0
	}, "a new id published after the repeats delivered, and the outbox empty")
	sleep(500 * time.Millisecond)
	x.idle(n)
	c.expect(x, q, 1, append(ids, "o6")...)
}
