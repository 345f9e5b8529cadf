package parity

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/outbox"
)

// Per-key order through the outbox's other paths: batches of a key that the node handed to the
// outbox while the backend was unreachable come before the key's later batches, published
// directly once it is back; a replayed dead letter goes to the back of its key.

func init() {
	register("ordering",
		property{name: "order_through_handoff_outage", dup: true, run: orderThroughHandoff},
		property{name: "dead_letter_replay_back_of_key", run: orderReplayBackOfKey},
	)
}

// orderThroughHandoff: during an outage, keys h-0..h-2 get 4 messages each (one per publish
// call), which the node hands to the outbox; after Restore, and before the outbox publishes
// anything (its sweep is not started yet), each key gets 4 more, published directly: the key's
// order must hold, outbox batches first. Key "fresh", published only after Restore, is not held
// up by the outbox.
func orderThroughHandoff(x *X) {
	x.needOrdering()
	q := ordered(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 2})
	o := newOrderLog()
	s := x.store(x.rawClient(), outbox.Options{RecoveryAge: 300 * time.Millisecond, SweepInterval: 200 * time.Millisecond, BackoffBase: 200 * time.Millisecond, BackoffMax: time.Second})
	n := x.node(txmq.NodeOptions{Handoff: s})
	listenOrdered(x, o, q, n, nil)
	keys := keyNames("h", 3)
	ctx := context.Background()
	x.Env.Break(x.T)
	restored := false
	defer func() {
		if !restored {
			x.Env.Restore(x.T)
		}
	}()
	publishInterleaved(ctx, x, q, n, keys, 4)
	x.eventually(func() bool { st := n.Stats(); return st.Buffered == 0 && st.HandedOff > 0 }, func() string {
		return fmt.Sprintf("buffered publishes handed to the outbox: %+v", n.Stats())
	})
	x.Env.Restore(x.T)
	restored = true
	for seq := 4; seq < 8; seq++ {
		for _, k := range keys {
			if err := q.Publish(ctx, n, seqMsg(k, seq), txmq.Key(k)); err != nil {
				x.T.Fatalf("Publish %s#%d: %v", k, seq, err)
			}
		}
	}
	if err := q.Publish(ctx, n, seqMsg("fresh", 0), txmq.Key("fresh")); err != nil {
		x.T.Fatalf("Publish fresh#0: %v", err)
	}
	// Key "fresh" has nothing in the outbox: it goes to the backend while the others wait.
	x.eventually(func() bool { return o.delivered("fresh") == 1 }, "key fresh, never in the outbox, delivered after Restore")
	x.eventually(func() bool { return n.Stats().Buffered == 0 }, "the later publishes flushed")
	if err := s.Start(x.ctx()); err != nil {
		x.T.Fatalf("Store.Start: %v", err)
	}
	want := map[string]int{"fresh": 1}
	for _, k := range keys {
		want[k] = 8
	}
	waitOrdered(x, o, want)
	x.idle(n)
	o.check(x)
	x.eventually(func() bool { return outboxRows(x, s) == 0 }, "outbox rows deleted after publish")
}

// orderReplayBackOfKey: key r's first batch is dead-lettered (a budget of one run) and r goes
// on; while r#2 runs and r#3 waits behind it, the dead letter is replayed, then r#4 is
// published: the replayed r#0 runs after r#3 and before r#4, at the back of its key as it was
// when replayed, never beside another batch of r.
func orderReplayBackOfKey(x *X) {
	x.needOrdering()
	q := ordered(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 1, MaxAttempts: 1})
	s := x.store(x.rawClient(), outbox.Options{})
	o := newOrderLog()
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	x.T.Cleanup(open)
	var mu sync.Mutex
	var runs []string
	// A long lease (steadyLease): with a budget of one run, a batch whose claim a loaded
	// machine let pass its fence is dead-lettered (worker_lost) when it comes back.
	o2 := x.steadyLease()
	o2.DeadLetters = s
	n := x.node(o2)
	listenOrdered(x, o, q, n, func(ctx context.Context, msgs []Msg) error {
		mu.Lock()
		runs = append(runs, msgs[0].K)
		first := len(runs) == 1
		mu.Unlock()
		switch {
		case msgs[0].K == "r#0" && first:
			return errBoom
		case msgs[0].K == "r#2":
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	ran := func(k string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(runs, k)
	}
	pub := func(seq int) {
		x.T.Helper()
		if err := q.Publish(context.Background(), n, seqMsg("r", seq), txmq.Key("r")); err != nil {
			x.T.Fatalf("Publish r#%d: %v", seq, err)
		}
		x.eventually(func() bool { return n.Stats().Buffered == 0 }, "r#%d flushed", seq)
	}
	pub(0)
	pub(1)
	var dead []outbox.DeadLetterRow
	x.eventually(func() bool {
		var err error
		dead, err = s.ListDeadLetters(x.ctx(), outbox.DLQFilter{Queue: q.Name(), State: outbox.DLQDead})
		if err != nil {
			x.T.Fatalf("ListDeadLetters: %v", err)
		}
		return len(dead) == 1 && ran("r#1")
	}, "r#0 dead-lettered after its one run, r#1 delivered")
	pub(2)
	x.eventually(func() bool { return ran("r#2") }, "r#2 running")
	pub(3)
	if err := s.Replay(x.ctx(), dead[0].ID); err != nil {
		x.T.Fatalf("Replay: %v", err)
	}
	pub(4)
	open()
	x.eventually(func() bool { return ran("r#4") }, "r#4 delivered")
	x.idle(n)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"r#0", "r#1", "r#2", "r#3", "r#0", "r#4"}; !slices.Equal(runs, want) {
		x.T.Fatalf("runs of key r: %v; want %v (the replayed r#0 at the back of its key as it was when replayed)", runs, want)
	}
	o.check(x)
}
