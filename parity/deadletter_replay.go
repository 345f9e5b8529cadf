package parity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

func init() {
	register("deadletters",
		property{name: "replay_fails_again_dead_again", run: replayFailsAgain},
		property{name: "replay_while_original_stored", run: replayWhileStored},
		property{name: "replay_original_back_on_another_node", run: replayOriginalElsewhere},
		property{name: "replay_on_unique_queue", run: replayUnique},
		property{name: "replay_while_no_node_runs", run: replayNoNode},
		property{name: "replay_ordered_while_original_stored", run: replayOrderedStored},
		property{name: "replay_on_exclusive_queue", run: replayOnExclusive},
	)
}

// replayFailsAgain: a replayed batch that fails for good again, on the node that dead-lettered
// it the first time, takes the whole terminal path again: its dead letter is dead once more
// (replayed once), OnError fires again, the drop is counted again. The node's memory of the
// batches it dead-lettered (which drops a batch that comes back after a failed Drop without a
// second dead letter) must not take the replay for the original coming back.
func replayFailsAgain(x *X) {
	var onErr atomic.Int64
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 1, OnError: func([]Msg, error, int) error { onErr.Add(1); return nil }})
	s := x.store(x.rawClient(), outbox.Options{})
	n := x.steadyNode(s)
	rec := newRecorder()
	listen(x, rec, q, n, func(context.Context, []Msg) error { return errBoom })
	publishKeys(x, q, n, "again", 1, 1)
	dl := waitDead(x, s, q.Name(), 0)
	if err := s.Replay(x.ctx(), dl.ID); err != nil {
		x.T.Fatalf("Replay: %v", err)
	}
	waitDead(x, s, q.Name(), 1)
	x.eventually(func() bool { return onErr.Load() >= 2 && rec.Runs() >= 2 }, func() string {
		return fmt.Sprintf("OnError fired %d times, the listener ran %d times; want 2 each (the first run and the replay's)", onErr.Load(), rec.Runs())
	})
	x.idle(n)
	if got := sumDropped(core.ReasonDeliveryExhausted, n) + sumDropped(core.ReasonWorkerLost, n); got != 2 {
		x.T.Fatalf("%d drops counted with reason %s or %s; want 2 (the first run's and the replay's)", got, core.ReasonDeliveryExhausted, core.ReasonWorkerLost)
	}
	if got := onErr.Load(); got != 2 {
		x.T.Fatalf("OnError fired %d times; want 2", got)
	}
}

// replayWhileStored: a batch is dead-lettered but its Drop fails, so the backend still stores
// it (leased, then back after its lease) when the operator replays the dead letter. The
// replay either publishes a batch that runs (a backend that stores each publish apart), or
// is refused with core.ErrStillStored (a backend that keeps one batch per id, while the
// original's lease is live) and succeeds once the original is dropped or its lease ended. Never does Replay report success for a batch that does not
// run: the original coming back is dropped without a second dead letter, the replay runs.
func replayWhileStored(x *X) {
	var l fixable
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 1})
	s := x.store(x.rawClient(), outbox.Options{})
	n, f := x.faultyNode(txmq.NodeOptions{DeadLetters: s})
	f.dropFails.Store(1 << 40)
	rec := newRecorder()
	listen(x, rec, q, n, l.run)
	publishKeys(x, q, n, "stored", 1, 1)
	dl := waitDead(x, s, q.Name(), 0)
	x.eventually(func() bool { return f.drops.Load() >= 1 }, "the dead-lettering node tried to drop the batch")
	l.fix()
	refused := replayPerhapsRefused(x, s, dl.ID, func() { f.dropFails.Store(0) })
	x.eventually(func() bool { return l.ok.Load() >= 1 }, func() string {
		return fmt.Sprintf("the replayed batch ran (Replay refused first: %v); runs: %s", refused, rec.Summary())
	})
	probe := x.rawClient()
	x.eventually(func() bool { return depths(x, probe, q.Name()) == core.Depth{} }, func() string {
		return fmt.Sprintf("the original and the replay gone from the backend (depths %s)", depthString(depths(x, probe, q.Name())))
	})
	x.idle(n)
	wantReplayedOnce(x, s, dl.ID, "the original coming back is not a new failure")
}

// replayOriginalElsewhere: node A dead-letters a batch but cannot drop it, and closes; the
// operator replays the dead letter; node B, which never saw the batch, gets the original back
// after its lease as well as the replay. The original is not a failure of the replay: the
// dead-letter store refuses it as already dead-lettered (core.ErrAlreadyDeadLettered), so B
// drops it without OnError, without a count and without marking the row dead again, and runs
// the replay. On a backend that refuses the replay while the original is leased
// (core.ErrStillStored), B drops the original against the row that is still dead, or the
// backend removes it once its lease ended; either way the replay runs.
func replayOriginalElsewhere(x *X) {
	var (
		onErr atomic.Int64
		ok    atomic.Int64
	)
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 1, OnError: func([]Msg, error, int) error { onErr.Add(1); return nil }})
	s := x.store(x.rawClient(), outbox.Options{})
	a, f := x.faultyNode(txmq.NodeOptions{DeadLetters: s})
	f.dropFails.Store(1 << 40)
	rec := newRecorder()
	listen(x, rec, q, a, func(context.Context, []Msg) error { return errBoom })
	publishKeys(x, q, a, "elsewhere", 1, 1)
	dl := waitDead(x, s, q.Name(), 0)
	x.eventually(func() bool { return f.drops.Load() >= 1 }, "node A tried to drop the dead-lettered batch")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = a.Close(ctx) // its Drop keeps failing: the original stays stored
	var b *txmq.Node
	replayPerhapsRefused(x, s, dl.ID, func() {
		b = x.node(txmq.NodeOptions{DeadLetters: s})
		listen(x, rec, q, b, func(context.Context, []Msg) error { ok.Add(1); return nil })
	})
	probe := x.rawClient()
	x.eventually(func() bool { return ok.Load() >= 1 && depths(x, probe, q.Name()) == core.Depth{} }, func() string {
		return fmt.Sprintf("the replay ran on node B (%d runs) and the original is gone (depths %s)", ok.Load(), depthString(depths(x, probe, q.Name())))
	})
	x.idle(b)
	if got := onErr.Load(); got != 1 {
		x.T.Fatalf("OnError fired %d times; want once (node A's): the original coming back to node B is not a new failure", got)
	}
	if got := sumDropped(core.ReasonDeliveryExhausted, b) + sumDropped(core.ReasonWorkerLost, b); got != 0 {
		x.T.Fatalf("node B counted %d drops; want none (the original is a dead letter already)", got)
	}
	wantReplayedOnce(x, s, dl.ID, "the original came back, the replay ran")
}

// replayNoNode: the node that dead-lettered a batch could not drop it and is gone, and no
// other node runs (the app is down while the operator fixes the listener and replays its dead
// letters). Replay must succeed without a node: at once on a backend that stores each publish
// apart, and once the original's lease has run out on one that keeps one batch per id (which
// removes the original then). The node started afterwards runs the replay, and drops
// the original, if still there, as the dead letter it is.
func replayNoNode(x *X) {
	var onErr, ok atomic.Int64
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 1, OnError: func([]Msg, error, int) error { onErr.Add(1); return nil }})
	s := x.store(x.rawClient(), outbox.Options{})
	a, f := x.faultyNode(txmq.NodeOptions{DeadLetters: s})
	f.dropFails.Store(1 << 40)
	listen(x, newRecorder(), q, a, func(context.Context, []Msg) error { return errBoom })
	publishKeys(x, q, a, "nonode", 1, 1)
	dl := waitDead(x, s, q.Name(), 0)
	x.eventually(func() bool { return f.drops.Load() >= 1 }, "node A tried to drop the dead-lettered batch")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = a.Close(ctx)
	replayPerhapsRefused(x, s, dl.ID, func() {})
	b := x.node(txmq.NodeOptions{DeadLetters: s}) // the default lease: the original comes back after it
	listen(x, newRecorder(), q, b, func(context.Context, []Msg) error { ok.Add(1); return nil })
	probe := x.rawClient()
	x.eventually(func() bool { return ok.Load() >= 1 && depths(x, probe, q.Name()) == core.Depth{} }, func() string {
		return fmt.Sprintf("the replay ran on node B (%d runs) and the original is gone (depths %s)", ok.Load(), depthString(depths(x, probe, q.Name())))
	})
	x.idle(b)
	if got := onErr.Load(); got != 1 {
		x.T.Fatalf("OnError fired %d times; want once (node A's)", got)
	}
	wantReplayedOnce(x, s, dl.ID, "replayed while no node ran, then run")
}

// replayOrderedStored: key o's head o#0 is dead-lettered but cannot be dropped, so it still
// holds o#1 and o#2 behind it when its node is gone and the dead letter is replayed. The
// replay goes to the back of its key, as every replay does, whichever way the backend makes
// room for it: the next node runs o#1, o#2, then the replayed o#0.
func replayOrderedStored(x *X) {
	x.needOrdering()
	q := ordered(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 1, MaxAttempts: 1})
	s := x.store(x.rawClient(), outbox.Options{})
	a, f := x.faultyNode(txmq.NodeOptions{DeadLetters: s})
	f.dropFails.Store(1 << 40)
	listen(x, newRecorder(), q, a, func(context.Context, []Msg) error { return errBoom })
	for seq := range 3 {
		if err := q.Publish(context.Background(), a, seqMsg("o", seq), txmq.Key("o")); err != nil {
			x.T.Fatalf("Publish o#%d: %v", seq, err)
		}
	}
	dl := waitDead(x, s, q.Name(), 0)
	x.eventually(func() bool { return f.drops.Load() >= 1 }, "node A tried to drop o#0")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = a.Close(ctx)
	replayPerhapsRefused(x, s, dl.ID, func() {})
	var (
		mu   sync.Mutex
		runs []string
	)
	b := x.node(txmq.NodeOptions{DeadLetters: s}) // the default lease: the original comes back after it
	listen(x, newRecorder(), q, b, func(_ context.Context, msgs []Msg) error {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(runs, msgs[0].K) { // a duplicate copy keeps its first place
			runs = append(runs, msgs[0].K)
		}
		return nil
	})
	probe := x.rawClient()
	x.eventually(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) == 3 && depths(x, probe, q.Name()) == core.Depth{}
	}, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("node B ran o#1, o#2 and the replayed o#0 (ran %v; depths %s)", runs, depthString(depths(x, probe, q.Name())))
	})
	x.idle(b)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"o#1", "o#2", "o#0"}; !slices.Equal(runs, want) {
		x.T.Fatalf("runs of key o on node B: %v; want %v (the replayed o#0 at the back of its key)", runs, want)
	}
	wantReplayedOnce(x, s, dl.ID, "replayed to the back of its key, then run")
}

// replayUnique: a dead letter of a unique queue (UniqueWindow, whose key the original holds
// for the whole window whatever became of it) is replayed: the operator asked for that batch
// again, so the replay is stored and runs, whoever holds the key, and is not taken for a
// repeat of the original's publish (the same batch id holding the key).
func replayUnique(x *X) {
	const window = time.Hour
	x.needUnique(txmq.UniqueWindow, window)
	var l fixable
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 1, Unique: txmq.Unique{Mode: txmq.UniqueWindow, Window: window}})
	s := x.store(x.rawClient(), outbox.Options{})
	n := x.steadyNode(s)
	listen(x, newRecorder(), q, n, l.run)
	pubK(x, q, n, "u#1", "u")
	dl := waitDead(x, s, q.Name(), 0)
	l.fix()
	if err := s.Replay(x.ctx(), dl.ID); err != nil {
		x.T.Fatalf("Replay of a unique queue's dead letter: %v", err)
	}
	x.eventually(func() bool { return l.ok.Load() >= 1 }, func() string {
		return fmt.Sprintf("the replayed batch of unique key u ran (%d runs); the original holds the key for %v", l.ok.Load(), window)
	})
	x.idle(n)
	wantReplayedOnce(x, s, dl.ID, "its replay ran")
}

// replayOnExclusive: a dead letter of an Exclusive queue, replayed while the queue's other
// batches run on two nodes, obeys Exclusive like every batch of the queue: at most one of the
// queue's batches runs at any time across the nodes, the replay's run included, and the
// replay runs (the replay publishes with the Exclusive flag its dead letter stored).
func replayOnExclusive(x *X) {
	var fixed atomic.Bool
	var replayed atomic.Int64
	q := declare(x, txmq.QueueConfig[Msg]{Exclusive: true, MaxBatchMessages: 1, MaxAttempts: 1})
	s := x.store(x.rawClient(), outbox.Options{})
	a, b := x.steadyNode(s), x.steadyNode(s)
	rec := newRecorder()
	run := func(ctx context.Context, msgs []Msg) error {
		for _, m := range msgs {
			if strings.HasPrefix(m.K, "bad") {
				if !fixed.Load() {
					return errBoom
				}
				replayed.Add(1)
			}
		}
		return sleepy(5*time.Millisecond)(ctx, msgs)
	}
	listen(x, rec, q, a, run)
	listen(x, rec, q, b, run)
	publishKeys(x, q, a, "bad", 1, 1)
	dl := waitDead(x, s, q.Name(), 0)
	fixed.Store(true)
	keys := publishKeys(x, q, b, "x", 12, 12)
	replayPerhapsRefused(x, s, dl.ID, func() {})
	waitDelivered(x, rec, keys)
	x.eventually(func() bool { return replayed.Load() >= 1 }, func() string {
		return fmt.Sprintf("the replay of the Exclusive queue's dead letter ran; runs: %s", rec.Summary())
	})
	x.idle(a, b)
	if p := rec.Peak(q.Name()); p != 1 {
		x.T.Fatalf("Exclusive queue peaked at %d concurrent batches across two nodes with a replay among them; want exactly 1", p)
	}
	wantReplayedOnce(x, s, dl.ID, "its replay ran")
}

// steadyNode is a node with the steady lease (x.steadyLease: a budget of one run is not spent
// by a lease that a loaded machine lets pass) and s as its dead-letter sink.
func (x *X) steadyNode(s *outbox.Store) *txmq.Node {
	x.T.Helper()
	o := x.steadyLease()
	o.DeadLetters = s
	return x.node(o)
}

// fixable is a listener that fails with errBoom until fix, then succeeds, counting its
// successful runs in ok.
type fixable struct {
	mu    sync.Mutex
	fixed bool
	ok    atomic.Int64
}

func (l *fixable) run(context.Context, []Msg) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.fixed {
		return errBoom
	}
	l.ok.Add(1)
	return nil
}

func (l *fixable) fix() { l.mu.Lock(); l.fixed = true; l.mu.Unlock() }

// replayPerhapsRefused replays dead letter id while its original may still be stored: Replay
// succeeds, or is refused with core.ErrStillStored (a backend that keeps one batch per id),
// and then, once then has run (what lets the original go), is tried until it succeeds. then
// runs either way. It reports whether the first Replay was refused.
func replayPerhapsRefused(x *X, s *outbox.Store, id int64, then func()) bool {
	x.T.Helper()
	err := s.Replay(x.ctx(), id)
	refused := errors.Is(err, core.ErrStillStored)
	if err != nil && !refused {
		x.T.Fatalf("Replay while the original may be stored: %v; want nil or an error wrapping core.ErrStillStored", err)
	}
	then()
	if refused {
		x.eventually(func() bool {
			err = s.Replay(x.ctx(), id)
			if err != nil && !errors.Is(err, core.ErrStillStored) {
				x.T.Fatalf("Replay once the original can be dropped: %v", err)
			}
			return err == nil
		}, func() string { return fmt.Sprintf("Replay accepted once the original is dropped; last: %v", err) })
	}
	return refused
}

// wantReplayedOnce fails unless dead letter id was replayed once and is not dead (why says
// what happened to the batch).
func wantReplayedOnce(x *X, s *outbox.Store, id int64, why string) {
	x.T.Helper()
	got, err := s.GetDeadLetter(x.ctx(), id)
	if err != nil {
		x.T.Fatalf("GetDeadLetter: %v", err)
	}
	if got.Dead() || got.ReplayCount != 1 {
		x.T.Fatalf("dead letter: dead %v, replayed %d times, reason %q; want replayed once and not dead (%s)", got.Dead(), got.ReplayCount, got.Reason, why)
	}
}

// waitDead waits until queue has exactly one dead letter, dead now and replayed replays times,
// and returns it.
func waitDead(x *X, s *outbox.Store, queue string, replays int) outbox.DeadLetterRow {
	x.T.Helper()
	var last []outbox.DeadLetterRow
	x.eventually(func() bool {
		var err error
		last, err = s.ListDeadLetters(x.ctx(), outbox.DLQFilter{Queue: queue})
		if err != nil {
			x.T.Fatalf("ListDeadLetters: %v", err)
		}
		return len(last) == 1 && last[0].Dead() && last[0].ReplayCount == replays
	}, func() string {
		rows := make([]string, len(last))
		for i, r := range last {
			rows[i] = fmt.Sprintf("{dead %v, replays %d}", r.Dead(), r.ReplayCount)
		}
		return fmt.Sprintf("one dead letter of queue %s, dead, replayed %d times; have %v", queue, replays, rows)
	})
	return last[0]
}
