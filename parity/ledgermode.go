package parity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// Ledger mode (ledger.Options.Mode) in the messages group: a backend that loses a batch it
// acknowledged (a Redis restarted without persistence, a NATS server killed before its fsync)
// loses nothing with ledger mode on, and loses the batch without it.

func init() {
	register("messages",
		property{name: "ledger_mode_republishes_lost_batch", run: ledgerModeRepublishes},
		property{name: "ledger_mode_republish_keeps_id_dedup", run: ledgerModeKeepsIDDedup},
	)
}

// losing is a backend that acknowledges every publish of a batch of the queues in lose
// without storing it during window after the batch's first publish, as a transport that
// forgets acknowledged data does (and the outbox's at-least-once second publish of the same
// batch with it).
type losing struct {
	core.Backend
	window time.Duration
	mu     sync.Mutex
	lose   map[string]bool
	seen   map[string]time.Time // queue + "/" + batch id: its first publish
	lost   int
}

func newLosing(b core.Backend, window time.Duration, queues ...string) *losing {
	l := &losing{Backend: b, window: window, lose: map[string]bool{}, seen: map[string]time.Time{}}
	for _, q := range queues {
		l.lose[q] = true
	}
	return l
}

func (l *losing) Publish(ctx context.Context, b core.OutgoingBatch) error {
	l.mu.Lock()
	k := b.Queue + "/" + b.ID
	if _, ok := l.seen[k]; !ok {
		l.seen[k] = time.Now()
	}
	drop := l.lose[b.Queue] && time.Since(l.seen[k]) < l.window
	if drop {
		l.lost++
	}
	l.mu.Unlock()
	if drop {
		return nil
	}
	return l.Backend.Publish(ctx, b)
}

// Unwrap gives the wrapped backend to core's capability checks.
func (l *losing) Unwrap() core.Backend { return l.Backend }

func (l *losing) lostCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// ledgerModeLedger opens a ledger in mode with a short horizon in a fresh schema.
func (x *X) ledgerModeLedger(horizon time.Duration) *ledger.Ledger {
	x.T.Helper()
	pool := x.postgresPool()
	o := &ledger.Options{Schema: testenv.PostgresSchema(x.T, pool), FlushInterval: 20 * time.Millisecond, Logger: x.logger,
		Mode: true, Horizon: horizon, RepublishInterval: 200 * time.Millisecond}
	if err := ledger.Migrate(x.ctx(), pool, o); err != nil {
		x.T.Fatalf("ledger.Migrate: %v", err)
	}
	l, err := ledger.New(pool, o)
	if err != nil {
		x.T.Fatalf("ledger.New: %v", err)
	}
	x.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Close(ctx)
	})
	return l
}

// ledgerModeRepublishes: the backend acknowledges and forgets the publishes, within half the
// horizon, of a plain publish's batch and of a transactional publish's batch (relayed by the
// outbox). With ledger
// mode on, both are delivered after the horizon, published again from the ledger, and once
// they complete the ledger keeps no batch any more; on a node without ledger mode the same
// loss is never delivered, while a batch published after it is.
func ledgerModeRepublishes(x *X) {
	horizon := 2 * time.Second
	lg := x.ledgerModeLedger(horizon)
	qLost := declare(x, txmq.QueueConfig[Msg]{})
	qTx := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Require})
	qOff := declare(x, txmq.QueueConfig[Msg]{})
	qOffOK := declare(x, txmq.QueueConfig[Msg]{})

	be, _ := x.client()
	lossy := newLosing(be, horizon/2, qLost.Name(), qTx.Name(), qOff.Name())
	n := x.nodeOn(lossy, txmq.NodeOptions{Ledger: lg})
	store := x.store(lg.Keeping(lossy), outbox.Options{})
	if err := store.Start(x.ctx()); err != nil {
		x.T.Fatalf("outbox Start: %v", err)
	}
	offBE, _ := x.client()
	offLossy := newLosing(offBE, horizon/2, qOff.Name())
	offNode := x.nodeOn(offLossy, txmq.NodeOptions{}) // no ledger mode

	rec := newRecorder()
	listen(x, rec, qLost, n, nil)
	listen(x, rec, qTx, n, nil)
	listen(x, rec, qOff, offNode, nil)
	listen(x, rec, qOffOK, offNode, nil)

	start := time.Now()
	lost := publishKeys(x, qLost, n, "lost-"+qLost.Name(), 3, 3)
	var txKeys []string
	if err := runInTx(x.ctx(), store, func(ctx context.Context) error {
		txKeys = publishKeysCtx(ctx, x, qTx, n, "tx-"+qTx.Name(), 2, 2)
		return nil
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	offLost := publishKeys(x, qOff, offNode, "off-"+qOff.Name(), 3, 3)
	x.eventually(func() bool { return lossy.lostCount() >= 2 && offLossy.lostCount() >= 1 },
		"the lossy backends acknowledged and forgot the first publish of each lost batch")
	offOK := publishKeys(x, qOffOK, offNode, "offok-"+qOffOK.Name(), 2, 2)

	waitDelivered(x, rec, append(append([]string(nil), lost...), txKeys...))
	var st ledger.Stats
	x.eventually(func() bool { st = lg.Stats(); return st.Republished >= 2 && st.Kept >= 2 },
		func() string {
			return fmt.Sprintf("ledger stats %+v: want at least the 2 lost batches kept and republished", st)
		})
	x.eventually(func() bool {
		k, err := lg.KeptBatches(context.Background())
		return err == nil && k == 0
	}, "the ledger keeps no batch once every one completed")

	// Without ledger mode the loss stays a loss: a later batch of the same node is delivered,
	// the lost one is not, well past the horizon that brought the others back.
	waitDelivered(x, rec, offOK)
	for time.Since(start) < 3*horizon {
		time.Sleep(100 * time.Millisecond)
	}
	if got := rec.MinCount(offLost); got != 0 || rec.Has(offLost[0]) {
		x.T.Fatalf("without ledger mode, the batch the backend forgot was delivered (%d): the losing wrapper does not lose", got)
	}
}

// ledgerModeKeepsIDDedup: a batch whose run outlasts ledger mode's horizon is published again
// from the ledger, and when its messages carry caller ids on a queue with an IDDedupWindow the
// republished copy goes through the same id dedup as any publish: the backend, which still
// holds the ids, refuses it, and the message is delivered once. Every write path to the
// backend (flush, outbox, ledger) must honour the window.
func ledgerModeKeepsIDDedup(x *X) {
	x.needDedup()
	horizon := 2 * time.Second
	lg := x.ledgerModeLedger(horizon)
	window := dedupLongWindow
	if sup, err := core.DedupsIDs(x.rawClient()); err == nil && sup.MaxWindow > 0 {
		window = min(window, sup.MaxWindow)
	}
	q := declare(x, txmq.QueueConfig[Msg]{IDDedupWindow: window})
	n := x.node(txmq.NodeOptions{Ledger: lg, Lease: dedupLease})
	key := "slow-" + q.Name()
	if err := q.Publish(context.Background(), n, Msg{K: key}, txmq.ID(key)); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	// Stored before anyone listens: the backend's setup for the window (a NATS stream update)
	// does not overlap the listener's first fetch.
	x.eventually(func() bool { return n.Stats().PublishedMessages == 1 }, "the message stored")
	rec := newRecorder()
	var slow sync.Once
	listen(x, rec, q, n, func(context.Context, []Msg) error {
		slow.Do(func() { sleep(3 * horizon) }) // the first run outlasts the horizon
		return nil
	})
	var st ledger.Stats
	x.eventually(func() bool { st = lg.Stats(); return st.Republished >= 1 },
		func() string { return fmt.Sprintf("ledger stats %+v: want the slow batch republished", st) })
	waitDelivered(x, rec, []string{key})
	x.eventually(func() bool {
		k, err := lg.KeptBatches(context.Background())
		return err == nil && k == 0
	}, "the ledger keeps no batch once the slow one completed")
	sleep(500 * time.Millisecond) // a wrong second copy's chance to show
	x.idle(n)
	if c := rec.Count(key); c != 1 {
		x.T.Fatalf("message %s delivered %d times: the ledger's republished copy skipped the queue's IDDedupWindow", key, c)
	}
}
