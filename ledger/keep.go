package ledger

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// Defaults of ledger mode's options.
const (
	// HorizonLeases is how many leases the default Horizon allows a batch between two signs
	// of life.
	HorizonLeases = 10
	// HorizonRedelivery is what the default Horizon adds for the backend's own redelivery
	// (a reaper's or redelivery timer's period, a restart).
	HorizonRedelivery = time.Minute
	// DefaultHorizon is HorizonFor(core.DefaultLease): 6 min.
	DefaultHorizon = HorizonLeases*core.DefaultLease + HorizonRedelivery
	// DefaultRepublishBatch bounds the batches of one republish pass.
	DefaultRepublishBatch = 100
	// DefaultMaxRepublish is how many times one batch is published again at most.
	DefaultMaxRepublish = 5
)

// HorizonFor returns the default Horizon of ledger mode for nodes with the given lease:
// HorizonLeases leases plus HorizonRedelivery.
func HorizonFor(lease time.Duration) time.Duration {
	if lease <= 0 {
		lease = core.DefaultLease
	}
	return HorizonLeases*lease + HorizonRedelivery
}

// keepWriteTimeout bounds one grouped write of kept batches.
const keepWriteTimeout = 30 * time.Second

// modeStats are ledger mode's counters.
type modeStats struct {
	kept, republished, gaveUp atomic.Int64
}

// keepGroup is the batches of one grouped write and its outcome.
type keepGroup struct {
	batches []core.OutgoingBatch
	done    chan struct{}
	err     error
}

// keepQueue groups concurrent KeepBatch calls into one statement: while one write runs, the
// next calls join the following group (group commit).
type keepQueue struct {
	mu      sync.Mutex
	next    *keepGroup
	writing bool
}

// Mode reports whether ledger mode is on (Options.Mode).
func (l *Ledger) Mode() bool { return l.opts.Mode }

// Horizon returns ledger mode's horizon (Options.Horizon).
func (l *Ledger) Horizon() time.Duration { return l.opts.Horizon }

// KeepBatch stores b in the ledger, durably, before it goes to the backend (ledger mode; a
// no-op when Options.Mode is off). Concurrent calls share one statement. A batch kept again
// (the same queue and id) takes the later deadline and keeps its republish count.
func (l *Ledger) KeepBatch(ctx context.Context, b core.OutgoingBatch) error {
	if !l.opts.Mode {
		return nil
	}
	b.Body = append([]byte(nil), b.Body...) // the caller may reuse it once we return
	b.Delay = b.DelayFrom(time.Now())
	b.MessageIDs = nil
	k := &l.keeps
	k.mu.Lock()
	if k.next == nil {
		k.next = &keepGroup{done: make(chan struct{})}
	}
	g := k.next
	g.batches = append(g.batches, b)
	start := !k.writing
	k.writing = true
	k.mu.Unlock()
	if start {
		go l.keepWriter()
	}
	select {
	case <-g.done:
		return g.err
	case <-ctx.Done():
		return fmt.Errorf("txmq ledger: keeping batch %s of queue %q: %w", b.ID, b.Queue, ctx.Err())
	}
}

// keepWriter writes the waiting groups one after the other until none is left.
func (l *Ledger) keepWriter() {
	k := &l.keeps
	for {
		k.mu.Lock()
		g := k.next
		k.next = nil
		if g == nil {
			k.writing = false
			k.mu.Unlock()
			return
		}
		k.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), keepWriteTimeout)
		g.err = l.writeKeeps(ctx, g.batches)
		cancel()
		if g.err == nil {
			l.mode.kept.Add(int64(len(g.batches)))
		}
		close(g.done)
	}
}

// writeKeeps upserts batches as one statement (the last of a queue and id wins).
func (l *Ledger) writeKeeps(ctx context.Context, batches []core.OutgoingBatch) error {
	type key struct{ queue, id string }
	at := make(map[key]int, len(batches))
	uniq := batches[:0:0]
	for _, b := range batches {
		if i, ok := at[key{b.Queue, b.ID}]; ok {
			uniq[i] = b
			continue
		}
		at[key{b.Queue, b.ID}] = len(uniq)
		uniq = append(uniq, b)
	}
	n := len(uniq)
	queues, ids, keys := make([]string, n), make([]string, n), make([]string, n)
	bodies := make([][]byte, n)
	excl := make([]bool, n)
	msgs := make([]int32, n)
	delays := make([]int64, n)
	for i, b := range uniq {
		queues[i], ids[i], keys[i], bodies[i] = b.Queue, b.ID, b.Key, b.Body
		excl[i], msgs[i], delays[i] = b.Exclusive, int32(b.Messages), b.Delay.Microseconds()
	}
	_, err := l.pool.Exec(ctx, `INSERT INTO `+l.kept+` AS k (queue, batch_id, body, exclusive, order_key, messages, due, deadline)
SELECT q, id, body, ex, ok, m, CASE WHEN d > 0 THEN now() + d * interval '1 microsecond' END, now() + (d + $8) * interval '1 microsecond'
FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bool[], $5::text[], $6::int[], $7::bigint[]) AS t(q, id, body, ex, ok, m, d)
ON CONFLICT (queue, batch_id) DO UPDATE SET body = excluded.body, due = excluded.due,
	deadline = GREATEST(k.deadline, excluded.deadline)`,
		queues, ids, bodies, excl, keys, msgs, delays, l.opts.Horizon.Microseconds())
	if err != nil {
		return fmt.Errorf("txmq ledger: keeping %d batch(es) in %s (ledger mode): %w", n, l.kept, err)
	}
	return nil
}

// batchEvents turns the events of a grouped write into ledger mode's statements: the batches
// whose completion or dead letter was recorded are settled (no longer kept), and the ones that
// showed a sign of life (a run's start, a retry) get their deadline pushed
// to Horizon after it (after the retry's due time for a retry).
func (l *Ledger) batchEvents(b *pgx.Batch, events []core.BatchEvent) {
	type key struct{ queue, id string }
	settled := map[key]bool{}
	touched := map[key]time.Time{}
	for _, e := range events {
		if e.BatchID == "" {
			continue
		}
		k := key{e.Queue, e.BatchID}
		switch e.State {
		case core.StateCompleted, core.StateDead:
			settled[k] = true
		case core.StateRunning, core.StateRetry: // a publish's own event: KeepBatch set the deadline
			at := e.UpdatedAt
			if e.State == core.StateRetry && e.Due.After(at) { // a running event's Due is its lease's end
				at = e.Due
			}
			if at.After(touched[k]) {
				touched[k] = at
			}
		}
	}
	if len(touched) > 0 {
		var queues, ids []string
		var ats []time.Time
		for k, at := range touched {
			if !settled[k] {
				queues, ids, ats = append(queues, k.queue), append(ids, k.id), append(ats, at)
			}
		}
		b.Queue(`UPDATE `+l.kept+` AS k SET deadline = GREATEST(k.deadline, t.at + $4 * interval '1 microsecond')
FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS t(q, id, at) WHERE k.queue = t.q AND k.batch_id = t.id`,
			queues, ids, ats, l.opts.Horizon.Microseconds())
	}
	if len(settled) > 0 {
		var queues, ids []string
		for k := range settled {
			queues, ids = append(queues, k.queue), append(ids, k.id)
		}
		b.Queue(`DELETE FROM `+l.kept+` AS k USING unnest($1::text[], $2::text[]) AS t(q, id) WHERE k.queue = t.q AND k.batch_id = t.id`, queues, ids)
	}
}

// keeping is a backend whose Publish keeps each batch in the ledger first (for the outbox).
type keeping struct {
	core.Backend
	l *Ledger
}

// Keeping returns a backend that keeps every batch in the ledger (KeepBatch) before
// publishing it to b, for the outbox's relay and sweep (outbox.Options.Backend) in ledger
// mode; b itself when the mode is off. A batch the ledger cannot keep is not published: the
// error wraps core.ErrBackendUnavailable, so the outbox keeps the row and tries again without
// counting an attempt. It passes on only core.Backend's methods: give the node b itself (the
// node keeps its own publishes through NodeOptions.Ledger).
func (l *Ledger) Keeping(b core.Backend) core.Backend {
	if !l.opts.Mode {
		return b
	}
	return &keeping{Backend: b, l: l}
}

// Publish keeps b, then publishes it.
func (k *keeping) Publish(ctx context.Context, b core.OutgoingBatch) error {
	if err := k.l.KeepBatch(ctx, b); err != nil {
		return fmt.Errorf("%w: %w", core.ErrBackendUnavailable, err)
	}
	return k.forgetRefused(ctx, b, k.Backend.Publish(ctx, b))
}

// KeptBatches returns how many batches ledger mode keeps now (published, not yet settled).
func (l *Ledger) KeptBatches(ctx context.Context) (int, error) {
	var n int
	if err := l.pool.QueryRow(ctx, `SELECT count(*) FROM `+l.kept).Scan(&n); err != nil {
		return 0, fmt.Errorf("txmq ledger: counting the kept batches in %s: %w", l.kept, err)
	}
	return n, nil
}
