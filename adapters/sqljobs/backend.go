package sqljobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/reaper"
	"github.com/txmq/txmq/core/sqlcall"
	"github.com/txmq/txmq/internal/pgmigrate"
)

// Backend is a core.Backend storing batches in a Postgres jobs table. It is safe for
// concurrent use; every Backend on the same database and schema (one per process, or several
// in a test) shares the stored batches. The zero value is not usable: call New or Open.
type Backend struct {
	pool    *pgxpool.Pool
	ownPool bool // opened from a URL: Close closes the pool
	o       Options
	sql     statements
	channel string

	listenConfig *pgx.ConnConfig // Options.ListenURL parsed; nil: the pool's

	// sessionGuard: every session of the pool plans with enable_seqscan off (SessionPlanGuard),
	// so statements go without the per-statement plan guard.
	sessionGuard bool

	closed    atomic.Bool
	call      *sqlcall.Runner // every call's timeout, retry and classification
	done      chan struct{}   // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup // the listener and the reaper

	lis     *listener
	deletes *group // Acks and Drops
	extends *group // Extends
	// keyedDeletes groups the Acks and Drops of ordered queues' batches (sqlAckKeyed).
	keyedDeletes *group
	publishes    *publishGroup // plain publishes

	hb reaper.Heartbeats // the queue heartbeats this Backend wrote

	reaper *reaper.Reaper
}

var _ core.Backend = (*Backend)(nil)

// New returns a Backend on pool, whose tables must already exist in opts.Schema (run Migrate
// first, or open the Backend with a postgres:// URL, which migrates). It checks that with one
// query and starts the reaper (see Options.ReapInterval). Close does not close pool. A pool
// configured with SessionPlanGuard (one given to the Backend alone) saves a statement per
// claim and settle; on any other pool each jobs-table statement carries its own plan guard.
func New(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Backend, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, fmt.Errorf("%w: sqljobs: New needs a *pgxpool.Pool; pass the app's pool", core.ErrInvalidConfig)
	}
	qctx, cancel := context.WithTimeout(ctx, o.QueryTimeout)
	versions, err := pgmigrate.Applied(qctx, pool, Component, o.Schema)
	cancel()
	if err != nil {
		return nil, classify(fmt.Sprintf("checking the migrations of schema %q", o.Schema), err)
	}
	if !slices.Contains(versions, 1) {
		return nil, fmt.Errorf("%w: sqljobs: the jobs tables are missing from schema %q; run sqljobs.Migrate(ctx, pool, opts) first (opening a postgres:// backend URL does it for you)", core.ErrInvalidConfig, o.Schema)
	}
	if !slices.Contains(versions, 2) {
		o.Logger.Warn("sqljobs: the jobs tables lack migration 2 (the state index); run sqljobs.Migrate or `txmq migrate`: until then Depths reads every row of a queue", "schema", o.Schema)
	}
	listenConfig, err := checkPooler(pool, &o)
	if err != nil {
		return nil, err
	}
	be := &Backend{
		listenConfig: listenConfig,
		sessionGuard: sessionGuarded(pool, o.PgBouncer),
		pool:         pool,
		o:            o,
		sql:          render(o.Schema),
		channel:      channel(o.Schema),
		done:         make(chan struct{}),
	}
	be.lis = newListener(be)
	be.deletes = newGroup(be, be.execDeletes)
	be.keyedDeletes = newGroup(be, be.execKeyedDeletes)
	be.extends = newGroup(be, be.execExtends)
	be.publishes = newPublishGroup(be)
	be.call = &sqlcall.Runner{Name: "sqljobs", Timeout: o.QueryTimeout, Retryable: retryable, Classify: classify, Unavailable: Unavailable, Closed: &be.closed}
	be.reaper = be.newReaper()
	if o.ReapInterval > 0 {
		be.wg.Go(func() { be.reaper.Loop(be.done, o.ReapInterval) })
	}
	return be, nil
}

// Publish stores the batch, claimable once its delay (b.DelayFrom) has passed on the
// database's clock (its now plus the delay: the app's clock is never compared with the
// database's), and wakes nodes waiting for its queue. Concurrent plain publishes (no
// DedupWindow, Unique or ordering Key) share one statement (see Options.SettleWindow); each
// returns its own batch's outcome.
func (be *Backend) Publish(ctx context.Context, b core.OutgoingBatch) error {
	op := fmt.Sprintf("publish batch %s to queue %q", b.ID, b.Queue)
	if err := be.usable(op); err != nil {
		return err
	}
	if err := checkSize(op, len(b.Body)); err != nil {
		return err
	}
	if b.Queue == "" {
		return fmt.Errorf("%w: sqljobs: publish batch %s: the queue name is empty; pass the declared queue name", core.ErrInvalidConfig, b.ID)
	}
	delay := b.DelayFrom(time.Now())
	delayUs := int64((delay + time.Microsecond - 1) / time.Microsecond) // rounded up: never early
	body := b.Body
	if body == nil {
		body = []byte{}
	}
	if b.DedupWindow <= 0 && b.Unique.Mode == 0 && b.Key == "" {
		return be.publishPlain(ctx, op, b, body, delayUs) // grouped with concurrent ones
	}
	var dup *core.DuplicateError
	var held *core.UniqueError
	err := be.run(ctx, op, func(ctx context.Context) error {
		if b.DedupWindow > 0 {
			err := be.publishDedup(ctx, b, body, delayUs)
			if errors.As(err, &dup) {
				return nil
			}
			return err
		}
		if b.Unique.Mode != 0 {
			err := be.publishUnique(ctx, b, body, delayUs)
			if errors.As(err, &held) {
				return nil
			}
			return err
		}
		return be.publishKeyed(ctx, b, body, delayUs)
	})
	if err == nil && dup != nil {
		return dup
	}
	if err == nil && held != nil {
		return held
	}
	return err
}

// Depths reports the ready, in-flight and delayed batches of each named queue in one query.
// A batch whose lease ran out counts as ready; a queue without batches reports zeros.
// OldestReady is the smallest due time (run_at, a lease end for an expired lease) among the
// ready batches, on the database's clock, from the same index-only scan.
func (be *Backend) Depths(ctx context.Context, queues []string) (map[string]core.Depth, error) {
	if err := be.usable("depths"); err != nil {
		return nil, err
	}
	out := make(map[string]core.Depth, len(queues))
	err := be.run(ctx, "depths", func(ctx context.Context) error {
		rows, err := query(ctx, be.on(be.pool), be.sql.depths, queues)
		if err != nil {
			return err
		}
		var (
			q      string
			d      core.Depth
			oldest *time.Time
			scan   = []any{&q, &d.Ready, &d.InFlight, &d.Delayed, &oldest}
		)
		_, err = pgx.ForEachRow(rows, scan, func() error {
			d.OldestReady = time.Time{}
			if oldest != nil {
				d.OldestReady = *oldest
			}
			out[q] = d
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Close stops the listener and the reaper, wakes waiting fetches and makes every later call
// fail with an error wrapping core.ErrClosed. Stored batches stay. The pool is closed only
// when the Backend opened it (Open). Closing twice is a no-op.
func (be *Backend) Close() error {
	be.closeOnce.Do(func() {
		be.closed.Store(true)
		close(be.done)
		be.lis.stop()
		be.wg.Wait()
		if be.ownPool {
			be.pool.Close()
		}
	})
	return nil
}

// Pool returns the pool the Backend runs on.
func (be *Backend) Pool() *pgxpool.Pool { return be.pool }

// Schema returns the schema holding the Backend's tables.
func (be *Backend) Schema() string { return be.o.Schema }

// checkPooler checks the pool and Options.ListenURL against Options.PgBouncer and returns
// ListenURL's connection settings (nil without one).
func checkPooler(pool *pgxpool.Pool, o *Options) (*pgx.ConnConfig, error) {
	if o.PgBouncer {
		switch pool.Config().ConnConfig.DefaultQueryExecMode {
		case pgx.QueryExecModeDescribeExec:
			return nil, fmt.Errorf("%w: sqljobs: Options.PgBouncer is set but the pool uses pgx.QueryExecModeDescribeExec, whose describe and execute round trips may land on two server connections; use default_query_exec_mode=exec in the pool's URL (or ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec)", core.ErrInvalidConfig)
		case pgx.QueryExecModeCacheStatement:
			o.Logger.Warn("sqljobs: Options.PgBouncer is set but the pool uses named prepared statements (pgx's default); that works only with PgBouncer >= 1.21 and max_prepared_statements > 0, else set default_query_exec_mode=exec in the pool's URL")
		}
	}
	if o.ListenURL == "" {
		return nil, nil
	}
	cfg, err := pgx.ParseConfig(o.ListenURL)
	if err != nil {
		return nil, fmt.Errorf("%w: sqljobs: Options.ListenURL %s: %v; give a postgres:// URL of the server itself (not the pooler)", core.ErrInvalidConfig, core.Redact(o.ListenURL), core.RedactError(err, o.ListenURL))
	}
	return cfg, nil
}

// usable returns the error of a call made after Close.
func (be *Backend) usable(op string) error { return be.call.Usable(op) }

// run runs fn with Options.QueryTimeout on top of ctx, once more at once when the first
// failure is retryable, and classifies the error (package core/sqlcall).
func (be *Backend) run(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	return be.call.Run(ctx, op, fn)
}

// attempt runs fn with Options.QueryTimeout on top of ctx, once more at once when the first
// failure is retryable, and returns its error as it is.
func (be *Backend) attempt(ctx context.Context, fn func(ctx context.Context) error) error {
	return be.call.Attempt(ctx, fn)
}

// syncCommit is the synchronous_commit of claim, settle and extend transactions: 'off', or
// nil (the session's setting) with Options.DurableSettles or when the transaction claims or
// extends an Exclusive queue's batch: a lock the database forgot in a crash would let a second
// node run the queue while the first still does.
func (be *Backend) syncCommit(exclusive bool) *string {
	if be.o.DurableSettles || exclusive {
		return nil
	}
	off := "off"
	return &off
}

// micros converts a duration to whole microseconds for the SQL's interval arithmetic.
func micros(d time.Duration) int64 { return d.Microseconds() }
