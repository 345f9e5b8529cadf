package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// ErrNotFound means a dead letter id does not exist (or no longer does).
var ErrNotFound = errors.New("txmq outbox: not found")

// Store is the outbox and dead-letter store in one schema of the app's PostgreSQL database.
// It implements core.Handoff and core.DeadLetterSink; give it to txmq.NodeOptions. Its methods
// are safe for concurrent use. The schema's other tables have types of their own, reached
// from the Store: Pauses (queue pause marks), Ticks (schedule ticks), Limits (the shared
// rate limit) and Nodes (the nodes' heartbeats).
type Store struct {
	pool      *pgxpool.Pool // nil on a store of another dialect (NewWithDialect)
	db        Dialect       // the database's statements (dialect.go)
	pg        *pgDialect    // db when it is PostgreSQL's, else nil
	o         Options
	log       *slog.Logger
	backend   core.Backend
	outbox    string // quoted table names
	dead      string
	channel   string
	listenCfg *pgx.ConnConfig // Options.ListenURL parsed; nil: a connection of the pool

	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	loops   sync.WaitGroup
	kick    chan struct{}

	ac    afterCommit // the after-commit publishers of RunInTx (aftercommit.go)
	adhoc adhocRelay  // RunInSQLTx's relay passes on a store not started (sqltx.go)

	handoffs      handoffQueue // handoffs waiting for a single-writer database (singlewriter.go)
	sqlTxOpen     atomic.Int64 // RunInSQLTx transactions open (appMayHoldWriter)
	withSQLTxUsed atomic.Bool  // WithSQLTx was called (appMayHoldWriter)

	pauses *Pauses // the store's other jobs, on the same pool and schema
	ticks  *Ticks
	limits *Limits
	nodes  *Nodes

	// keyedWaiting says rows of an ordering key may wait behind rows of the key that are being
	// published (a keyed Handoff, or a pass that left a keyed row for later): the after-commit
	// publishers wake the relay once they published keyed rows (see order.go).
	keyedWaiting atomic.Bool
}

var (
	_ core.Handoff        = (*Store)(nil)
	_ core.DeadLetterSink = (*Store)(nil)
)

// New returns a store on pool. opts.Backend is required. Run Migrate first, and Start to run
// the relay and the recovery sweep in this process.
func New(pool *pgxpool.Pool, opts *Options) (*Store, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, fmt.Errorf("%w: outbox.New needs a *pgxpool.Pool on the app's database", core.ErrInvalidConfig)
	}
	if o.Backend == nil {
		return nil, fmt.Errorf("%w: outbox: Options.Backend is required: the outbox publishes its rows there (use the node's backend)", core.ErrInvalidConfig)
	}
	if o.PgBouncer {
		switch pool.Config().ConnConfig.DefaultQueryExecMode {
		case pgx.QueryExecModeDescribeExec:
			return nil, fmt.Errorf("%w: outbox: Options.PgBouncer is set but the pool uses pgx.QueryExecModeDescribeExec, whose describe and execute round trips may land on two server connections; use default_query_exec_mode=exec in the pool's URL (or ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec)", core.ErrInvalidConfig)
		case pgx.QueryExecModeCacheStatement:
			o.Logger.Warn("txmq outbox: Options.PgBouncer is set but the pool uses named prepared statements (pgx's default); that works only with PgBouncer >= 1.21 and max_prepared_statements > 0, else set default_query_exec_mode=exec in the pool's URL")
		}
	}
	var listenCfg *pgx.ConnConfig
	if o.ListenURL != "" {
		if listenCfg, err = pgx.ParseConfig(o.ListenURL); err != nil {
			return nil, fmt.Errorf("%w: outbox: Options.ListenURL %s: %v; give a postgres:// URL of the server itself (not the pooler)", core.ErrInvalidConfig, core.Redact(o.ListenURL), core.RedactError(err, o.ListenURL))
		}
	}
	pg := newPGDialect(pool, o.Schema)
	s := &Store{
		pool: pool, db: pg, pg: pg, o: o, backend: o.Backend, listenCfg: listenCfg,
		log:     o.Logger.With("txmq_component", "outbox", "txmq_schema", o.Schema),
		outbox:  pg.outbox,
		dead:    pg.dead,
		channel: pg.channel,
		kick:    make(chan struct{}, 1),
		pauses:  newPauses(pool, o.Schema),
		limits:  newLimits(pool, o.Schema),
		nodes:   newNodes(pool, o.Schema),
	}
	s.ticks = newTicks(s, o.Schema)
	return s, nil
}

// NewWithDialect returns a store on another database than PostgreSQL, through its Dialect
// (for MySQL/MariaDB: github.com/txmq/txmq/adapters/mysql/appdb, which also migrates).
// opts.Backend is required; opts.Schema is ignored (the dialect names its schema or
// database). Such a store has no LISTEN/NOTIFY: its relay looks for due rows every
// Options.PollInterval (default 250 ms), and is woken at once in this process when a
// RunInSQLTx transaction commits. Pauses, Ticks, Limits and Nodes are the dialect's tables
// when it keeps them (ControlDialect: MySQL/MariaDB's does), else nil. RunInTx, WithTx and
// Savepoint (pgx transactions) need PostgreSQL, and so do the inspection queries unless the
// dialect answers them (InspectDialect): they return an error wrapping ErrNeedsPostgres.
func NewWithDialect(d Dialect, opts *Options) (*Store, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: outbox.NewWithDialect needs a Dialect", core.ErrInvalidConfig)
	}
	var c Options
	if opts != nil {
		c = *opts
	}
	c.Schema, c.PgBouncer, c.ListenURL = "", false, ""
	o, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	o.Schema = d.Schema()
	if o.Backend == nil {
		return nil, fmt.Errorf("%w: outbox: Options.Backend is required: the outbox publishes its rows there (use the node's backend)", core.ErrInvalidConfig)
	}
	outbox, dead := d.Tables()
	s := &Store{
		db: d, o: o, backend: o.Backend,
		log:    o.Logger.With("txmq_component", "outbox", "txmq_db", d.Name(), "txmq_schema", o.Schema),
		outbox: outbox,
		dead:   dead,
		kick:   make(chan struct{}, 1),
	}
	s.controlTables(d)
	return s, nil
}

// ErrNeedsPostgres is wrapped by the errors of the Store methods that only PostgreSQL has,
// called on a store of another dialect.
var ErrNeedsPostgres = fmt.Errorf("%w: this needs the app database on PostgreSQL", core.ErrInvalidConfig)

// needsPG returns an error naming method when s is not on PostgreSQL.
func (s *Store) needsPG(method, instead string) error {
	if s.pg != nil {
		return nil
	}
	if instead != "" {
		instead = "; " + instead
	}
	return fmt.Errorf("txmq outbox: Store.%s on the %s app database (schema %q): %w%s", method, s.db.Name(), s.o.Schema, ErrNeedsPostgres, instead)
}

// Dialect returns the name of the store's database ("postgres", "mysql").
func (s *Store) Dialect() string {
	if s == nil {
		return ""
	}
	return s.db.Name()
}

// Schema returns the schema the store's tables live in.
func (s *Store) Schema() string {
	if s == nil {
		return ""
	}
	return s.o.Schema
}

// Handoff stores batches the backend refused at flush time (or that a closing node could not
// publish in time) as rows due now: the very next recovery sweep publishes them, without
// waiting for Options.RecoveryAge (no other process is about to publish them; the sweep stops
// at once while the backend is still unavailable, and a failed row backs off as any other).
// On a database with one writer at a time (SQLite, SingleWriterDialect), a handoff whose ctx
// carries an open transaction of this store is written into that transaction, which holds the
// writer, and any other waits for the writer, at most 250 ms while a transaction of the app
// may hold it in this process, and then stays queued in memory until it is written (see
// singlewriter.go). It implements core.Handoff.
func (s *Store) Handoff(ctx context.Context, batches []core.OutgoingBatch) error {
	if s == nil {
		return errNoStore("Handoff")
	}
	if len(batches) == 0 {
		return nil
	}
	if _, ok := s.singleWriter(); ok {
		if done, err := s.handoffInSQLTx(ctx, batches); done {
			if err != nil {
				return fmt.Errorf("txmq outbox: handing off %d batch(es) of queue(s) %s into the open transaction on the %s app database: %w",
					len(batches), queueList(batches), s.db.Name(), err)
			}
			s.wakeKeyed(batches)
			return nil
		}
		s.queueHandoff(ctx, batches)
		return nil
	}
	_, err := s.db.Insert(ctx, batches, true)
	if err != nil {
		return fmt.Errorf("txmq outbox: handing off %d batch(es) of queue(s) %s to the outbox table %s: %w; check the app database and that outbox.Migrate ran",
			len(batches), queueList(batches), s.outbox, err)
	}
	s.wakeKeyed(batches)
	return nil
}

// wakeKeyed wakes the relay when batches, just handed off, hold a keyed one.
func (s *Store) wakeKeyed(batches []core.OutgoingBatch) {
	for _, b := range batches {
		if b.Key != "" {
			// A node hands a keyed batch off to follow earlier rows of its key: the relay
			// publishes it as soon as they are gone, not at the next sweep.
			s.keyedWaiting.Store(true)
			s.wake()
			break
		}
	}
}

// querier runs a query returning rows; pgx.Tx, *pgxpool.Pool and *pgx.Conn satisfy it.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// insertChunk is the most rows one INSERT carries (6 parameters per row, far below 65535).
const insertChunk = 1000

// outboxCols are the columns every insert sets.
const outboxCols = 6

// insertSQL returns a multi-row INSERT of n rows into table with $n placeholders. due sets
// next_attempt_at to now() (rows the relay publishes at once); otherwise it stays NULL. A
// row's not_before is the database's clock at the insert plus the batch's delay in
// microseconds (NULL for none): the due time is on the app database's clock, the one the
// relay and the sweep later measure what is left of it with (see remainingSQL).
func insertSQL(table string, n int, due bool) string {
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(table)
	b.WriteString(" (queue, batch_id, body, not_before, exclusive, order_key")
	if due {
		b.WriteString(", next_attempt_at")
	}
	b.WriteString(") VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for c := range outboxCols {
			if c > 0 {
				b.WriteByte(',')
			}
			if c == notBeforeCol {
				b.WriteString("clock_timestamp()+$")
				b.WriteString(strconv.Itoa(i*outboxCols + c + 1))
				b.WriteString("::bigint*interval '1 microsecond'")
				continue
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(i*outboxCols + c + 1))
		}
		if due {
			b.WriteString(",now()")
		}
		b.WriteByte(')')
	}
	return b.String()
}

// notBeforeCol is the index of not_before among outboxCols.
const notBeforeCol = 3

// remainingSQL is what is left of a row's delay, in whole microseconds rounded up, measured on
// the app database's clock at the start of the reading transaction (so never less than what
// is truly left); NULL for a row without a delay or one already due.
const remainingSQL = `CASE WHEN not_before > now() THEN ceil(extract(epoch FROM not_before - now()) * 1000000)::bigint END`

// insertArgs flattens batches into insertSQL's parameters: a batch's delay goes in as
// microseconds, rounded up (NULL for none).
func insertArgs(batches []core.OutgoingBatch) []any {
	args := make([]any, 0, len(batches)*outboxCols)
	now := time.Now()
	for _, b := range batches {
		var delay any
		if d := b.DelayFrom(now); d > 0 {
			delay = int64((d + time.Microsecond - 1) / time.Microsecond)
		}
		var key any
		if b.Key != "" {
			key = b.Key
		}
		args = append(args, b.Queue, b.ID, b.Body, delay, b.Exclusive, key)
	}
	return args
}

// withRemaining sets b's delay to what is left of its row's (remainingSQL, nil when due).
func withRemaining(b *core.OutgoingBatch, us *int64) {
	b.Delay, b.NotBefore = 0, time.Time{}
	if us != nil && *us > 0 {
		b.Delay = time.Duration(*us) * time.Microsecond
		b.NotBefore = time.Now().Add(b.Delay)
	}
}

// claimed turns a row a Dialect claimed into a row on its way to the backend: its delay left
// as a due time on this process's clock, and what the body says of dedup and priority.
func claimed(r Row) row {
	out := row{id: r.ID, attempts: r.Attempts, batch: r.Batch}
	b := &out.batch
	b.NotBefore = time.Time{}
	if b.Delay > 0 {
		b.NotBefore = time.Now().Add(b.Delay)
	} else {
		b.Delay = 0
	}
	// A batch whose caller ids deduplicate says so in its envelope (the after-commit path
	// has it from the engine already); so does a prioritized queue's batch its priority,
	// and a fair queue's batch its fairness key.
	b.DedupWindow, b.DedupIDs = envelope.DedupOf(b.Body)
	b.Priority, b.Lead = envelope.PriorityOf(b.Body)
	b.FairKey = envelope.FairKeyOf(b.Body)
	b.Unique = envelope.UniqueOf(b.Body) // and a unique queue's batch its key
	return out
}

// insertRows inserts batches (in chunks) and returns their rows with ids.
func insertRows(ctx context.Context, q querier, table string, batches []core.OutgoingBatch, due bool) ([]row, error) {
	out := make([]row, 0, len(batches))
	for len(batches) > 0 {
		chunk := batches[:min(len(batches), insertChunk)]
		batches = batches[len(chunk):]
		rows, err := q.Query(ctx, insertSQL(table, len(chunk), due)+" RETURNING id, batch_id", insertArgs(chunk)...)
		if err != nil {
			return nil, err
		}
		ids := make(map[string]int64, len(chunk))
		for rows.Next() {
			var id int64
			var bid string
			if err := rows.Scan(&id, &bid); err != nil {
				rows.Close()
				return nil, err
			}
			ids[bid] = id
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		for _, b := range chunk {
			id, ok := ids[b.ID]
			if !ok {
				return nil, fmt.Errorf("insert returned no id for batch %s of queue %q", b.ID, b.Queue)
			}
			out = append(out, row{id: id, batch: b})
		}
	}
	return out, nil
}

// queueList names the distinct queues of batches, for errors.
func queueList(batches []core.OutgoingBatch) string {
	var names []string
	seen := map[string]bool{}
	for _, b := range batches {
		if !seen[b.Queue] {
			seen[b.Queue] = true
			names = append(names, strconv.Quote(b.Queue))
		}
	}
	return strings.Join(names, ", ")
}

// safeHook runs a metrics hook, recovering its panics.
func (s *Store) safeHook(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("txmq outbox: hook panicked", "panic", r)
		}
	}()
	fn()
}

// ErrNoDatabase is returned by the methods of a nil *Store: the app has no database, so it has
// no outbox, no transactional publishing and no dead-letter table. txmq.Open leaves App.Store
// nil when TXMQ_DATABASE_URL is not set.
var ErrNoDatabase = fmt.Errorf("%w: no app database configured: set TXMQ_DATABASE_URL (txmq.Config.DatabaseURL) to a postgres:// URL to use transactions, the outbox and dead letters", core.ErrInvalidConfig)

// errNoStore names the method called on a nil *Store.
func errNoStore(method string) error {
	return fmt.Errorf("txmq outbox: Store.%s: %w", method, ErrNoDatabase)
}
