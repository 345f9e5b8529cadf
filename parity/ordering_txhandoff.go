package parity

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/outbox"
)

// Per-key order of the batches a node hands to the outbox while a transaction of the app is
// open in the same process. On a database with one writer at a time (SQLite) that transaction
// holds the writer: a handoff made outside it waits in memory, one made inside it (the node's
// flush of a key the transaction publishes) is written into it, and rows written into it are
// seen by no other connection before the commit. Whatever the app database, the handoffs keep
// the order of the publish calls, and a key whose handed-off batch waits in the open
// transaction is not free for a direct write meanwhile.

func init() {
	register("ordering",
		property{name: "handoff_while_transaction_open", dup: true, run: orderHandoffInOpenTx},
	)
}

// orderHandoffInOpenTx: with the backend down, inside a transaction of the app database,
// keys j and k get a direct publish each (#0), handed to the outbox; then k#1 directly (still
// buffered) and k#2 inside the transaction, which stores k#1 first (inside the transaction on
// SQLite); the backend comes back and j#1 is published directly and stored before the commit.
// After the commit: j 0,1 and k 0,1,2 in order, nothing lost.
func orderHandoffInOpenTx(x *X) {
	x.needOrdering()
	q := ordered(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 3})
	s := x.store(x.rawClient(), outbox.Options{RecoveryAge: 300 * time.Millisecond, SweepInterval: 200 * time.Millisecond,
		BackoffBase: 100 * time.Millisecond, BackoffMax: 500 * time.Millisecond})
	if err := s.Start(x.ctx()); err != nil {
		x.T.Fatalf("Store.Start: %v", err)
	}
	o := newOrderLog()
	consumer := x.node(txmq.NodeOptions{})
	listenOrdered(x, o, q, consumer, nil)
	pub := x.node(txmq.NodeOptions{Handoff: s})
	ctx := context.Background()
	publish := func(ctx context.Context, k string, seq int) {
		x.T.Helper()
		if err := q.Publish(ctx, pub, seqMsg(k, seq), txmq.Key(k)); err != nil {
			x.T.Fatalf("Publish %s#%d: %v", k, seq, err)
		}
	}
	stored := func(n int64) func() bool {
		return func() bool { st := pub.Stats(); return st.Buffered == 0 && st.HandedOff+st.PublishedBatches >= n }
	}
	x.Env.Break(x.T)
	restored := false
	defer func() {
		if !restored {
			x.Env.Restore(x.T)
		}
	}()
	err := runInTx(ctx, s, func(tctx context.Context) error {
		publish(ctx, "j", 0)
		publish(ctx, "k", 0)
		x.eventually(stored(2), func() string { return fmt.Sprintf("j#0 and k#0 handed to the outbox: %+v", pub.Stats()) })
		publish(ctx, "k", 1)
		publish(tctx, "k", 2) // stores k#1 first
		x.Env.Restore(x.T)
		restored = true
		publish(ctx, "j", 1)
		x.eventually(stored(4), func() string { return fmt.Sprintf("k#1 and j#1 stored: %+v", pub.Stats()) })
		return nil
	})
	if err != nil {
		x.T.Fatalf("the transaction: %v", err)
	}
	waitOrdered(x, o, map[string]int{"j": 2, "k": 3})
	x.idle(consumer)
	o.check(x)
}
