package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/optdefault"
	"github.com/txmq/txmq/internal/pgmigrate"
)

// Defaults of Options.
const (
	// DefaultRetention is how long completed and cancelled rows are kept.
	DefaultRetention = 24 * time.Hour
	// DefaultFlushInterval is the period of the grouped writes.
	DefaultFlushInterval = 100 * time.Millisecond
	// DefaultFlushSize is how many buffered events trigger a write before the period ends.
	DefaultFlushSize = 20_000
	// DefaultMaxBuffered caps the message events buffered while the database does not answer
	// or is slow.
	DefaultMaxBuffered = 1_000_000
	// DefaultPruneInterval is the period of the pruner (which also runs at start).
	DefaultPruneInterval = time.Minute
	// DefaultPruneBatch bounds the rows one prune statement deletes.
	DefaultPruneBatch = 1000
	// DefaultCancelCheck is how often a node's ledger reads the cancelled messages.
	DefaultCancelCheck = 250 * time.Millisecond
)

// Options configures a Ledger. A nil *Options, and every zero field, means the default
// documented on the field.
type Options struct {
	// Schema holds the ledger table (txmq_ledger). Default "txmq", as the outbox's.
	Schema string
	// Retention is how long completed and cancelled rows are kept after their last update.
	// Default 24 h.
	Retention time.Duration
	// FlushInterval is how often buffered events are written, as one statement. Default
	// 100 ms.
	FlushInterval time.Duration
	// FlushSize is how many buffered events make the flusher write before FlushInterval
	// ends. Default 20,000.
	FlushSize int
	// MaxBuffered caps the message events kept while writes fail or lag behind; events
	// beyond it are dropped, logged and counted (Stats.Dropped). An event costs about 45
	// bytes per message it names (its id), so the cap holds about 45 MB. A node at 300,000
	// messages a second records about 900,000 message events a second (publish, run,
	// settle): the default gives about a second of slack to a database write that stalls
	// (the former 200,000 dropped events under such a burst). Default 1,000,000.
	MaxBuffered int
	// PruneInterval is how often completed and cancelled rows past Retention are deleted;
	// the pruner also runs at start. Default 1 min.
	PruneInterval time.Duration
	// PruneBatch bounds the rows one prune statement deletes; the pruner repeats until a
	// statement deletes fewer. Default 1000.
	PruneBatch int
	// CancelCheck is how often a ledger that nodes ask about cancelled messages reads the
	// new cancels from the table (one indexed query), so that a batch's check costs no query;
	// a node whose last read is older than twice CancelCheck asks the table per batch
	// instead. CancelMessage returns after twice CancelCheck, once every node's next check
	// sees the cancel. Every process of an app must use the same value. Default 250 ms.
	CancelCheck time.Duration
	// NoPrune stops this Ledger from pruning: for tools that only read and cancel (txmq msg),
	// which must not apply a retention of their own. Default false: the pruner runs.
	NoPrune bool
	// Logger receives the ledger's logs. Default slog.Default().
	Logger *slog.Logger

	// Mode turns ledger mode on (see "Ledger mode" in the package doc): every batch published
	// is kept in the ledger until its completion or dead letter is recorded, and a batch not
	// settled within Horizon is published again from the ledger. It needs the table
	// txmq_ledger_batches of the ledger's migration 0002 (Migrate; txmq.Open migrates unless
	// SkipMigrate): without it the grouped writes fail. Default false.
	Mode bool
	// Horizon is how long a kept batch may go without a sign of life (its publish, a run's
	// start, a retry's due time) before it is published again. It must exceed the longest
	// time a batch waits in the backend before a node takes it (backlog included); a shorter
	// one makes duplicates, never loss. Every process of an app must use the same value.
	// Default HorizonFor(the node's lease) when txmq.Open makes the ledger, else
	// DefaultHorizon.
	Horizon time.Duration
	// RepublishInterval is how often a node looks for kept batches past their deadline.
	// Default Horizon/10, at least 1 s and at most 1 min.
	RepublishInterval time.Duration
	// RepublishBatch bounds the batches one republish pass takes (one transaction). Default
	// 100.
	RepublishBatch int
	// MaxRepublish is how many times one batch is published again; each time its next
	// deadline is twice as far. After the last one the ledger stops keeping it (logged at
	// error level and counted in Stats.GaveUp). Default 5.
	MaxRepublish int
}

func (o *Options) withDefaults() (c Options, err error) {
	if o != nil {
		c = *o
	}
	if c.Schema, err = pgmigrate.Schema("ledger", c.Schema); err != nil {
		return c, err
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if err := optdefault.Fill("ledger",
		optdefault.Field[time.Duration]{Name: "Retention", V: &c.Retention, Def: DefaultRetention},
		optdefault.Field[time.Duration]{Name: "FlushInterval", V: &c.FlushInterval, Def: DefaultFlushInterval},
		optdefault.Field[time.Duration]{Name: "PruneInterval", V: &c.PruneInterval, Def: DefaultPruneInterval},
		optdefault.Field[time.Duration]{Name: "CancelCheck", V: &c.CancelCheck, Def: DefaultCancelCheck},
		optdefault.Field[time.Duration]{Name: "Horizon", V: &c.Horizon, Def: DefaultHorizon},
	); err != nil {
		return c, err
	}
	if err := optdefault.Fill("ledger", optdefault.Field[time.Duration]{Name: "RepublishInterval", V: &c.RepublishInterval, Def: min(max(c.Horizon/10, time.Second), time.Minute)}); err != nil {
		return c, err
	}
	if err := optdefault.Fill("ledger",
		optdefault.Field[int]{Name: "FlushSize", V: &c.FlushSize, Def: DefaultFlushSize},
		optdefault.Field[int]{Name: "MaxBuffered", V: &c.MaxBuffered, Def: DefaultMaxBuffered},
		optdefault.Field[int]{Name: "PruneBatch", V: &c.PruneBatch, Def: DefaultPruneBatch},
		optdefault.Field[int]{Name: "RepublishBatch", V: &c.RepublishBatch, Def: DefaultRepublishBatch},
		optdefault.Field[int]{Name: "MaxRepublish", V: &c.MaxRepublish, Def: DefaultMaxRepublish},
	); err != nil {
		return c, err
	}
	return c, nil
}

// Ledger records the life of messages in the app database and answers lookups, listings and
// cancels. It implements core.MessageRecorder (give it to a node as NodeOptions.Ledger) and
// core.MessageStore. Create it with New; Close it after the nodes that record to it.
type Ledger struct {
	pool   *pgxpool.Pool
	opts   Options
	table  string // quoted schema.txmq_ledger: one row per message
	states string // quoted schema.txmq_ledger_states: one row per batch
	kept   string // quoted schema.txmq_ledger_batches
	log    *slog.Logger

	mu       sync.Mutex
	buf      []core.BatchEvent
	bufMsgs  int         // the messages of buf's events
	flushMu  sync.Mutex  // one write at a time, in buffer order
	attached attachedSet // under flushMu

	wake    chan struct{}
	stop    chan struct{}
	loops   sync.WaitGroup
	closed  atomic.Bool
	dropped atomic.Int64
	written atomic.Int64
	pruned  atomic.Int64

	cancels cancelCache
	keeps   keepQueue
	mode    modeStats
}

var (
	_ core.MessageRecorder = (*Ledger)(nil)
	_ core.MessageStore    = (*Ledger)(nil)
)

// New returns a Ledger writing to the txmq_ledger table of opts.Schema through pool (the
// table must exist: run Migrate first) and starts its flusher and pruner.
func New(pool *pgxpool.Pool, opts *Options) (*Ledger, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: ledger: New needs a *pgxpool.Pool; pass the app's pool", core.ErrInvalidConfig)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Ledger{
		pool: pool, opts: o, log: o.Logger,
		table:  pgx.Identifier{o.Schema, "txmq_ledger"}.Sanitize(),
		states: pgx.Identifier{o.Schema, "txmq_ledger_states"}.Sanitize(),
		kept:   pgx.Identifier{o.Schema, "txmq_ledger_batches"}.Sanitize(),
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
	}
	l.loops.Add(1)
	go l.flushLoop()
	if !o.NoPrune {
		l.loops.Add(1)
		go l.pruneLoop()
	}
	return l, nil
}

// Schema returns the schema of the ledger table.
func (l *Ledger) Schema() string { return l.opts.Schema }

// Stats are a Ledger's counters. Events count once per message they cover.
type Stats struct {
	// Written counts the events written.
	Written int64
	// Dropped counts the events dropped because the buffer was full (MaxBuffered).
	Dropped int64
	// Pruned counts the messages the pruner deleted (their rows, or their ids in batch rows).
	Pruned int64
	// Buffered is the number of events waiting to be written.
	Buffered int
	// Kept counts the batches ledger mode kept (a batch kept again counts again).
	Kept int64
	// Republished counts the batches ledger mode published again.
	Republished int64
	// GaveUp counts the batches ledger mode stopped keeping after MaxRepublish republishes.
	GaveUp int64
}

// Stats returns the ledger's counters.
func (l *Ledger) Stats() Stats {
	l.mu.Lock()
	n := l.bufMsgs
	l.mu.Unlock()
	return Stats{Written: l.written.Load(), Dropped: l.dropped.Load(), Pruned: l.pruned.Load(), Buffered: n,
		Kept: l.mode.kept.Load(), Republished: l.mode.republished.Load(), GaveUp: l.mode.gaveUp.Load()}
}

// RecordBatch buffers ev for the next grouped write; it never blocks on the database. When
// MaxBuffered events (counted per message) are already waiting, it is dropped, logged and
// counted.
func (l *Ledger) RecordBatch(ev core.BatchEvent) {
	n := len(ev.IDs)
	if n == 0 {
		return
	}
	l.mu.Lock()
	over := l.bufMsgs+n > l.opts.MaxBuffered
	if !over {
		l.buf = append(l.buf, ev)
		l.bufMsgs += n
	}
	total := l.bufMsgs
	l.mu.Unlock()
	if over {
		if l.dropped.Add(int64(n)) == int64(n) {
			l.log.Error("txmq ledger: buffer full (the database does not keep up or does not answer); events dropped (further drops are counted in Stats.Dropped)", "schema", l.opts.Schema, "queue", ev.Queue, "batch", ev.BatchID, "events", n, "max_buffered", l.opts.MaxBuffered)
		}
		return
	}
	if total >= l.opts.FlushSize {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// RecordMessages records events of single messages, each as a batch event of one message
// (for tools and tests; nodes call RecordBatch).
func (l *Ledger) RecordMessages(events []core.MessageInfo) {
	for _, e := range events {
		l.RecordBatch(core.BatchEvent{Queue: e.Queue, BatchID: e.BatchID, IDs: []string{e.ID}, State: e.State,
			PublishedAt: e.PublishedAt, UpdatedAt: e.UpdatedAt, Due: e.Due, Node: e.Node, Runs: e.Runs, Error: e.Error, Reason: e.Reason})
	}
}

// Flush writes the buffered events now. Lookups and cancels call it first, so they see what
// this process recorded.
func (l *Ledger) Flush(ctx context.Context) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	events, msgs := l.buf, l.bufMsgs
	l.buf, l.bufMsgs = nil, 0
	l.mu.Unlock()
	if len(events) == 0 {
		return nil
	}
	if err := l.write(ctx, events); err != nil {
		// Put them back in front, keeping their order, within the cap.
		l.mu.Lock()
		keep := events
		for len(keep) > 0 && msgs+l.bufMsgs > l.opts.MaxBuffered {
			l.dropped.Add(int64(len(keep[0].IDs)))
			msgs -= len(keep[0].IDs)
			keep = keep[1:]
		}
		l.buf = append(keep, l.buf...)
		l.bufMsgs += msgs
		l.mu.Unlock()
		return err
	}
	l.written.Add(int64(msgs))
	return nil
}

func (l *Ledger) flushLoop() {
	defer l.loops.Done()
	t := time.NewTicker(l.opts.FlushInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		case <-l.wake:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := l.Flush(ctx)
		cancel()
		switch {
		case err != nil && !failing:
			failing = true
			l.log.Error("txmq ledger: writing events failed; keeping them and trying again", "schema", l.opts.Schema, "error", err)
		case err == nil && failing:
			failing = false
			l.log.Info("txmq ledger: writing events works again", "schema", l.opts.Schema)
		}
	}
}

// Close writes what is buffered (bounded by ctx) and stops the flusher and pruner. Closing
// twice is a no-op. It does not close the pool.
func (l *Ledger) Close(ctx context.Context) error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	l.cancels.start.Do(func() {}) // no cancel reader starts from now on
	close(l.stop)
	l.loops.Wait()
	if err := l.Flush(ctx); err != nil {
		return fmt.Errorf("txmq ledger: final write of %d events in schema %q: %w", l.Stats().Buffered, l.opts.Schema, err)
	}
	return nil
}

// Exists reports whether the ledger table exists in opts.Schema (Migrate creates it).
func Exists(ctx context.Context, pool *pgxpool.Pool, opts *Options) (bool, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return false, err
	}
	var ok bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{o.Schema, "txmq_ledger"}.Sanitize()).Scan(&ok); err != nil {
		return false, fmt.Errorf("txmq ledger: checking for the ledger table in schema %q: %w", o.Schema, err)
	}
	return ok, nil
}
