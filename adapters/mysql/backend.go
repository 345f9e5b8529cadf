package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/groupcommit"
	"github.com/txmq/txmq/core/pollwake"
	"github.com/txmq/txmq/core/reaper"
	"github.com/txmq/txmq/core/sqlcall"
)

// Backend is a core.Backend storing batches in a jobs table of a MySQL or MariaDB database.
// It is safe for concurrent use; every Backend on the same database and schema (one per
// process, or several in a test) shares the stored batches. The zero value is not usable:
// call New or Open.
type Backend struct {
	db    *sql.DB
	ownDB bool // opened from a URL: Close closes it
	o     Options
	sql   statements

	maxBatch int // MaxBatchBytes, from the server's max_allowed_packet

	closed    atomic.Bool
	call      *sqlcall.Runner // every call's timeout, retry and classification
	done      chan struct{}   // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup // the reaper

	wake    *pollwake.Waker
	deletes *groupcommit.Group[*groupReq] // Acks and Drops
	extends *groupcommit.Group[*groupReq] // Extends
	// publishes groups plain publishes (publishgroup.go).
	publishes *groupcommit.Publishes

	exclMu    sync.Mutex
	exclReady map[string]bool // Exclusive queues whose lock row this Backend made sure of

	hb reaper.Heartbeats // the queue heartbeats this Backend wrote

	reaper *reaper.Reaper
}

var _ core.Backend = (*Backend)(nil)

// packetRoom is what a publish statement needs besides the body within max_allowed_packet.
const packetRoom = 64 << 10

// New returns a Backend on db (opened with github.com/go-sql-driver/mysql), whose tables must
// already exist in opts.Schema (run Migrate first, or open the Backend with a mysql:// URL,
// which migrates). It checks that, reads the server's max_allowed_packet (see MaxBatchBytes)
// and starts the reaper (see Options.ReapInterval). Close does not close db.
func New(ctx context.Context, db *sql.DB, opts *Options) (*Backend, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, fmt.Errorf("%w: mysql: New needs a *sql.DB opened with the mysql driver; pass the app's database", core.ErrInvalidConfig)
	}
	where := "the connection's database"
	if o.Schema != "" {
		where = fmt.Sprintf("database %q", o.Schema)
	}
	cctx, cancel := context.WithTimeout(ctx, o.QueryTimeout)
	defer cancel()
	versions, err := appliedVersions(cctx, db, o.Schema)
	if err != nil {
		return nil, classify("checking the migrations of "+where, err)
	}
	if !slices.Contains(versions, 1) {
		return nil, fmt.Errorf("%w: mysql: the jobs tables are missing from %s; run mysql.Migrate(ctx, db, opts) first (opening a mysql:// backend URL does it for you)", core.ErrInvalidConfig, where)
	}
	var packet int64
	if err := db.QueryRowContext(cctx, "SELECT @@max_allowed_packet").Scan(&packet); err != nil {
		return nil, classify("reading max_allowed_packet", err)
	}
	be := &Backend{
		db:        db,
		o:         o,
		sql:       renderAll(o.Schema),
		maxBatch:  int(max(packet-packetRoom, 1)),
		done:      make(chan struct{}),
		wake:      pollwake.New(),
		exclReady: map[string]bool{},
	}
	be.deletes = groupcommit.New(o.SettleWindow, o.SettleBatch, be.groupRun(be.execDeletes))
	be.extends = groupcommit.New(o.SettleWindow, o.SettleBatch, be.groupRun(be.execExtends))
	be.call = &sqlcall.Runner{Name: "mysql", Timeout: o.QueryTimeout, Retryable: retryable, Tries: deadlockTries, Classify: classify, Unavailable: Unavailable, Closed: &be.closed}
	be.publishes = be.newPublishes()
	be.reaper = be.newReaper()
	if o.ReapInterval > 0 {
		be.wg.Go(func() { be.reaper.Loop(be.done, o.ReapInterval) })
	}
	return be, nil
}

// sqlPublish stores one batch, due its delay ($4 µs) after the database's now; a grouped
// publish (publishgroup.go) repeats its row, sqlPublishRow, once per batch.
const sqlPublish = `
INSERT INTO {{s}}txmq_jobs (queue, batch_id, body, run_at, messages, created_at, priority, lead_us, fair_key)
VALUES ` + sqlPublishRow

// sqlPublishRow is one batch's row of sqlPublish.
const sqlPublishRow = `(?, ?, ?, {{now}} + ?, ?, {{now}}, ?, ?, ?)`

// Publish stores the batch, claimable once its delay (b.DelayFrom) has passed on the
// database's clock (its now plus the delay: the app's clock is never compared with the
// database's), and wakes this Backend's fetches waiting for its queue. Concurrent plain
// publishes (no DedupWindow, Unique or ordering Key) share one statement (see
// Options.SettleWindow); each returns its own batch's outcome.
func (be *Backend) Publish(ctx context.Context, b core.OutgoingBatch) error {
	op := fmt.Sprintf("publish batch %s to queue %q", b.ID, b.Queue)
	if err := be.usable(op); err != nil {
		return err
	}
	if err := be.checkSize(op, len(b.Body)); err != nil {
		return err
	}
	switch {
	case b.Queue == "":
		return fmt.Errorf("%w: mysql: publish batch %s: the queue name is empty; pass the declared queue name", core.ErrInvalidConfig, b.ID)
	case len(b.Queue) > maxNameBytes || len(b.ID) > maxNameBytes:
		return fmt.Errorf("%w: mysql: %s: a queue name or batch id over %d bytes does not fit the jobs table; use shorter names", core.ErrInvalidConfig, op, maxNameBytes)
	}
	delay := b.DelayFrom(time.Now())
	delayUs := int64((delay + time.Microsecond - 1) / time.Microsecond) // rounded up: never early
	body := b.Body
	if body == nil {
		body = []byte{}
	}
	if b.Unique.Mode == 0 && b.DedupWindow <= 0 && b.Key == "" {
		err := be.publishPlain(ctx, op, b, body, delayUs) // grouped with concurrent ones
		if err == nil {
			be.wake.Signal(b.Queue)
		}
		return err
	}
	var dup *core.DuplicateError
	var held *core.UniqueError
	err := be.run(ctx, op, func(ctx context.Context) error {
		dup, held = nil, nil
		switch {
		case b.Unique.Mode != 0:
			err := be.publishUnique(ctx, b, body, delayUs)
			if errors.As(err, &held) {
				return nil
			}
			return err
		case b.DedupWindow > 0:
			err := be.publishDedup(ctx, b, body, delayUs)
			if errors.As(err, &dup) {
				return nil
			}
			return err
		default:
			return inTx(ctx, be.db, readCommitted, func(tx *sql.Tx) error { return be.publishKeyed(ctx, tx, b, body, delayUs) })
		}
	})
	if err == nil && dup != nil {
		return dup
	}
	if err == nil && held != nil {
		return held
	}
	if err == nil {
		be.wake.Signal(b.Queue)
	}
	return err
}

// maxNameBytes is the longest queue name, batch id or message id the tables hold.
const maxNameBytes = 255

// sqlDepths counts each named queue's rows by derived state, reading the claim index only
// (it carries lease_token): its cost grows with the queues' batches, not the table's.
const sqlDepths = `
SELECT queue,
	COALESCE(SUM(run_at <= {{now}}), 0),
	MIN(IF(run_at <= {{now}}, run_at, NULL)),
	COALESCE(SUM(lease_token IS NOT NULL AND run_at > {{now}}), 0),
	COALESCE(SUM(lease_token IS NULL AND run_at > {{now}}), 0)
FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_claim_idx)
WHERE queue IN ({{in}})
GROUP BY queue`

// Depths reports the ready, in-flight and delayed batches of each named queue in one query.
// A batch whose lease ran out counts as ready; a queue without batches reports zeros.
// OldestReady is the smallest due time (run_at, a lease end for an expired lease) among the
// ready batches, on the database's clock.
func (be *Backend) Depths(ctx context.Context, queues []string) (map[string]core.Depth, error) {
	if err := be.usable("depths"); err != nil {
		return nil, err
	}
	out := make(map[string]core.Depth, len(queues))
	if len(queues) == 0 {
		return out, nil
	}
	args := make([]any, len(queues))
	for i, q := range queues {
		args[i] = q
	}
	err := be.run(ctx, "depths", func(ctx context.Context) error {
		clear(out)
		var (
			q      string
			d      core.Depth
			oldest sql.NullInt64
		)
		rows, err := be.db.QueryContext(ctx, withMarks(be.sql.depths, len(queues)), args...)
		return eachRow(rows, err, []any{&q, &d.Ready, &oldest, &d.InFlight, &d.Delayed}, func() error {
			d.OldestReady = time.Time{}
			if oldest.Valid {
				d.OldestReady = time.UnixMicro(oldest.Int64)
			}
			out[q] = d
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	for _, q := range queues {
		if _, ok := out[q]; !ok {
			out[q] = core.Depth{}
		}
	}
	return out, nil
}

// Close stops the reaper, wakes waiting fetches and makes every later call fail with an error
// wrapping core.ErrClosed. Stored batches stay. The database handle is closed only when the
// Backend opened it (Open). Closing twice is a no-op.
func (be *Backend) Close() error {
	be.closeOnce.Do(func() {
		be.closed.Store(true)
		close(be.done)
		be.wg.Wait()
		if be.ownDB {
			_ = be.db.Close()
		}
	})
	return nil
}

// DB returns the database handle the Backend runs on.
func (be *Backend) DB() *sql.DB { return be.db }

// Schema returns the database holding the Backend's tables ("" for the connection's own).
func (be *Backend) Schema() string { return be.o.Schema }

var _ core.SizeLimiter = (*Backend)(nil)

// MaxBatchBytes implements core.SizeLimiter: the server's max_allowed_packet (read by New)
// less 64 KiB for the rest of the statement. A larger body would make the server refuse the
// statement and end the connection.
func (be *Backend) MaxBatchBytes() int { return be.maxBatch }

// checkSize refuses a body over MaxBatchBytes before it is sent.
func (be *Backend) checkSize(op string, size int) error {
	if size > be.maxBatch {
		return fmt.Errorf("mysql: %s: the batch is %d bytes, over the %d bytes the server's max_allowed_packet lets one statement carry: %w; lower core's NodeOptions.MaxBatchBytes/MaxMessageBytes or raise max_allowed_packet",
			op, size, be.maxBatch, core.ErrRejected)
	}
	return nil
}

// usable returns the error of a call made after Close.
func (be *Backend) usable(op string) error { return be.call.Usable(op) }

// run runs fn with Options.QueryTimeout on top of ctx, again while its failures are retryable
// (up to deadlockTries runs), and classifies the error (package core/sqlcall).
func (be *Backend) run(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	return be.call.Run(ctx, op, fn)
}

// attempt runs fn with Options.QueryTimeout on top of ctx, again while its failures are
// retryable (up to deadlockTries runs), and returns its error as it is.
func (be *Backend) attempt(ctx context.Context, fn func(ctx context.Context) error) error {
	return be.call.Attempt(ctx, fn)
}

// micros converts a duration to whole microseconds for the SQL's arithmetic.
func micros(d time.Duration) int64 { return d.Microseconds() }
