package sqlite

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

// Backend is a core.Backend storing batches in a jobs table of a SQLite database file. It is
// safe for concurrent use; every Backend on the same file (one per process, or several in a
// test) shares the stored batches. The zero value is not usable: call New or Open.
type Backend struct {
	db    *sql.DB
	ownDB bool // opened from a URL: Close closes it
	o     Options

	closed    atomic.Bool
	call      *sqlcall.Runner // every call's timeout, retry and classification
	done      chan struct{}   // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup // the reaper

	writes chan struct{} // the write turn of this process's Backends on the file (writeturn.go)
	file   string        // the database file's name; "" for none
	flock  *fileLock     // the lock file beside the database; nil for none

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

// LockSuffix is appended to the database file's name for the lock file every Backend on the
// file takes around its writes (see the package doc's "Delivery semantics"): app.db has
// app.db-txmqlock beside it, as SQLite keeps app.db-wal and app.db-shm.
const LockSuffix = "-txmqlock"

// MaxBatchBytes is the largest batch body the Backend stores: SQLite's default
// SQLITE_MAX_LENGTH (1,000,000,000 bytes) less room for the rest of the row. A larger one is
// refused before it is sent, with an error wrapping core.ErrRejected.
const MaxBatchBytes = 1_000_000_000 - 64<<10

// New returns a Backend on db, a handle on a SQLite file opened with the modernc.org/sqlite
// driver (driver name "sqlite"), whose tables must already exist (run Migrate first, or open
// the Backend with a sqlite:// URL, which migrates). It checks that and starts the reaper (see
// Options.ReapInterval). Close does not close db.
//
// db should be opened in WAL mode (Migrate sets it, and it stays with the file) with a busy
// timeout on every connection, for example
// "file:app.db?_pragma=busy_timeout(5000)&_pragma=synchronous(FULL)"; New warns (Logger) when
// the connection it checks has none, since then a statement fails at once when another
// process holds the write lock.
func New(ctx context.Context, db *sql.DB, opts *Options) (*Backend, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, fmt.Errorf("%w: sqlite: New needs a *sql.DB opened with the modernc.org/sqlite driver; pass the app's database", core.ErrInvalidConfig)
	}
	cctx, cancel := context.WithTimeout(ctx, o.QueryTimeout)
	defer cancel()
	versions, err := appliedVersions(cctx, db)
	if err != nil {
		return nil, classify("checking the migrations", err)
	}
	if !slices.Contains(versions, 1) {
		return nil, fmt.Errorf("%w: sqlite: the jobs tables are missing from the database file; run sqlite.Migrate(ctx, db, opts) first (opening a sqlite:// backend URL does it for you)", core.ErrInvalidConfig)
	}
	if missing := missingVersions(versions); len(missing) > 0 {
		return nil, fmt.Errorf("%w: sqlite: the jobs tables lack migrations %v of this version of txmq (unique keys, priorities); run sqlite.Migrate(ctx, db, opts) or txmq migrate first (opening a sqlite:// backend URL does it for you)", core.ErrInvalidConfig, missing)
	}
	var busy int64
	if err := db.QueryRowContext(cctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
		return nil, classify("reading busy_timeout", err)
	}
	if busy == 0 {
		o.Logger.Warn("sqlite: the database handle has no busy timeout: a statement fails at once (ErrBackendUnavailable) while another process writes; open it with _pragma=busy_timeout(5000)")
	}
	var file string
	var seq int
	var name string
	if err := db.QueryRowContext(cctx, "PRAGMA database_list").Scan(&seq, &name, &file); err != nil {
		return nil, classify("reading the database file's name", err)
	}
	var flock *fileLock
	if file != "" {
		if flock, err = openFileLock(file + LockSuffix); err != nil {
			return nil, fmt.Errorf("sqlite: opening the writers' lock file beside %s: %w; make its directory writable", file, err)
		}
	}
	be := &Backend{
		flock:     flock,
		file:      file,
		db:        db,
		o:         o,
		done:      make(chan struct{}),
		writes:    acquireTurn(file),
		wake:      pollwake.New(),
		exclReady: map[string]bool{},
	}
	be.deletes = groupcommit.New(o.SettleWindow, o.SettleBatch, be.groupRun(be.execDeletes))
	be.extends = groupcommit.New(o.SettleWindow, o.SettleBatch, be.groupRun(be.execExtends))
	be.call = &sqlcall.Runner{Name: "sqlite", Timeout: o.QueryTimeout, Retryable: retryable, Classify: classify, Unavailable: Unavailable, Closed: &be.closed}
	be.publishes = be.newPublishes()
	be.reaper = be.newReaper()
	if o.ReapInterval > 0 {
		be.wg.Go(func() { be.reaper.Loop(be.done, o.ReapInterval) })
	}
	return be, nil
}

// sqlPublish stores one batch, due :delay µs after now, with its priority, lead and fairness
// key.
const sqlPublish = `
INSERT INTO txmq_jobs (queue, batch_id, body, run_at, messages, created_at, priority, lead_us, fair_key)
VALUES (:queue, :batch, :body, :now + :delay, :messages, :now, :prio, :lead, :fair)`

// Publish stores the batch, claimable once its delay (b.DelayFrom) has passed, and wakes this
// Backend's fetches waiting for its queue.
func (be *Backend) Publish(ctx context.Context, b core.OutgoingBatch) error {
	op := fmt.Sprintf("publish batch %s to queue %q", b.ID, b.Queue)
	if err := be.usable(op); err != nil {
		return err
	}
	if err := checkSize(op, len(b.Body)); err != nil {
		return err
	}
	if b.Queue == "" {
		return fmt.Errorf("%w: sqlite: publish batch %s: the queue name is empty; pass the declared queue name", core.ErrInvalidConfig, b.ID)
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
		}
		return be.inTx(ctx, func(tx execer) error { return be.publishKeyed(ctx, tx, b, body, delayUs) })
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

// publishArgs are the arguments of sqlPublish (and, with :held and :key, sqlPublishKeyed).
func publishArgs(b core.OutgoingBatch, body []byte, delayUs int64) []any {
	return []any{nowArg(), sql.Named("queue", b.Queue), sql.Named("batch", b.ID), sql.Named("body", body),
		sql.Named("delay", delayUs), sql.Named("messages", b.Messages), sql.Named("prio", prio(b)), sql.Named("lead", micros(b.Lead)),
		sql.Named("fair", b.FairKey)}
}

// sqlDepths counts each named queue's rows by derived state, reading the claim index only
// (it carries lease_token): its cost grows with the queues' batches, not the table's.
const sqlDepths = `
SELECT queue,
	COALESCE(SUM(run_at <= :now), 0),
	MIN(CASE WHEN run_at <= :now THEN run_at END),
	COALESCE(SUM(lease_token IS NOT NULL AND run_at > :now), 0),
	COALESCE(SUM(lease_token IS NULL AND run_at > :now), 0)
FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx
WHERE queue IN ({{in}})
GROUP BY queue`

// Depths reports the ready, in-flight and delayed batches of each named queue in one query.
// A batch whose lease ran out counts as ready; a queue without batches reports zeros.
// OldestReady is the smallest due time (run_at, a lease end for an expired lease) among the
// ready batches.
func (be *Backend) Depths(ctx context.Context, queues []string) (map[string]core.Depth, error) {
	if err := be.usable("depths"); err != nil {
		return nil, err
	}
	out := make(map[string]core.Depth, len(queues))
	if len(queues) == 0 {
		return out, nil
	}
	stmt := withList(sqlDepths, "q", len(queues))
	err := be.run(ctx, "depths", func(ctx context.Context) error {
		clear(out)
		var (
			q      string
			d      core.Depth
			oldest sql.NullInt64
		)
		rows, err := be.db.QueryContext(ctx, stmt, append(listArgs("q", queues), nowArg())...)
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
		if be.flock != nil {
			// A write whose caller gave up may still hold or await the lock: close after it
			// (or after QueryTimeout, when another process holds the lock that long).
			select {
			case be.writes <- struct{}{}:
				be.flock.close()
				<-be.writes // the turn is shared with the process's other Backends on the file
			case <-time.After(be.o.QueryTimeout):
				be.flock.close()
			}
		}
		releaseTurn(be.file)
		if be.ownDB {
			_ = be.db.Close()
		}
	})
	return nil
}

// DB returns the database handle the Backend runs on.
func (be *Backend) DB() *sql.DB { return be.db }

var _ core.SizeLimiter = (*Backend)(nil)

// MaxBatchBytes implements core.SizeLimiter: the constant MaxBatchBytes.
func (be *Backend) MaxBatchBytes() int { return MaxBatchBytes }

// checkSize refuses a body over MaxBatchBytes before it is sent.
func checkSize(op string, size int) error {
	if size > MaxBatchBytes {
		return fmt.Errorf("sqlite: %s: the batch is %d bytes, over the %d bytes a SQLite value holds: %w; lower core's NodeOptions.MaxBatchBytes/MaxMessageBytes",
			op, size, MaxBatchBytes, core.ErrRejected)
	}
	return nil
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
