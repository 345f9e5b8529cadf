package outbox

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
)

// The dialect seam. A Store keeps its policy (which rows are due, the order of a key's rows,
// poison rows, backoff, the relay and sweep loops, replay) here, once, and asks a Dialect for
// the statements of one database. PostgreSQL (pgx) is this package's own dialect (New); the
// MySQL/MariaDB one lives in the module github.com/txmq/txmq/adapters/mysql (package
// adapters/mysql/appdb) and SQLite's in github.com/txmq/txmq/adapters/sqlite (package
// adapters/sqlite/appdb), so that an app on PostgreSQL never requires their drivers. What only
// PostgreSQL has stays PostgreSQL-only and is refused with an error naming PostgreSQL on a
// store of another dialect: RunInTx, WithTx, Savepoint (they hand out a pgx.Tx; see
// RunInSQLTx for database/sql) and the LISTEN/NOTIFY wake-up. The inspection queries
// (ListOutbox, Backlog, DeadLetterCounts) and the control tables (Pauses, Ticks, Limits,
// Nodes) are optional interfaces of a Dialect (InspectDialect, ControlDialect): without them
// the first are refused with ErrNeedsPostgres and the others are nil.

// Dialect is the database half of a Store: the statements on the outbox and dead-letter
// tables of one database. Every method is safe for concurrent use. A Dialect never decides
// policy: it stores, claims, deletes and reads what the Store tells it to.
type Dialect interface {
	// Name names the database for messages ("postgres", "mysql").
	Name() string
	// Schema is the schema (PostgreSQL) or database (MySQL) holding the tables.
	Schema() string
	// Tables returns the quoted names of the outbox and dead-letter tables, for messages.
	Tables() (outbox, dead string)
	// Insert writes batches as outbox rows in a transaction of its own; due rows get a
	// next-attempt time of now (the relay publishes them at once), the others none (due after
	// the recovery age). A batch's delay (OutgoingBatch.DelayFrom) is stored as a not-before
	// time on the database's clock. It returns the rows' ids in the order of batches.
	Insert(ctx context.Context, batches []core.OutgoingBatch, due bool) ([]int64, error)
	// StageSQL returns one statement (and its arguments) that writes batches as due rows into
	// a transaction the app owns and, where the database has one, wakes the relays of every
	// process at commit. It is run with the app's own handle (WithSQLTx: ExecContext).
	StageSQL(batches []core.OutgoingBatch) (query string, args []any)
	// ClaimPage begins a transaction, locks (FOR UPDATE SKIP LOCKED) up to limit due rows
	// with ids above after in id order (rows with a next-attempt time in the past, and rows
	// without one created more than recoveryAge ago), and calls fn with them; it commits when
	// fn returns nil, and rolls back otherwise (returning fn's error). Each Row carries the
	// delay left of its not-before time, on the database's clock.
	ClaimPage(ctx context.Context, after int64, recoveryAge time.Duration, limit int, fn func(PageTx, []Row) error) error
	// InTx runs fn in a transaction of its own, committed when fn returns nil.
	InTx(ctx context.Context, fn func(PageTx) error) error
	// DeadLetter inserts dl (its error text already made storable) into the dead-letter
	// table. A batch already stored (same queue and non-empty batch id) keeps its row if it
	// is still dead (stored false); one replayed since is updated and dead again.
	DeadLetter(ctx context.Context, dl *core.DeadLetter) (stored bool, err error)
	// ListDeadLetters returns the dead letters f selects by ascending id, at most f.Limit.
	ListDeadLetters(ctx context.Context, f DLQFilter) ([]DeadLetterRow, error)
	// GetDeadLetter returns one dead letter, or an error wrapping ErrNotFound.
	GetDeadLetter(ctx context.Context, id int64) (*DeadLetterRow, error)
	// ReplayDeadLetter locks dead letter id (an error wrapping ErrNotFound when there is
	// none), calls fn with it and, when fn returns nil, marks it replayed (replay_count+1,
	// replayed_at now) in the same transaction.
	ReplayDeadLetter(ctx context.Context, id int64, fn func(*DeadLetterRow) error) error
	// PurgeDeadLetters deletes the dead letters f selects (f.Limit 0: all) and counts them.
	PurgeDeadLetters(ctx context.Context, f DLQFilter) (int64, error)
	// HoldsKey reports whether the outbox holds a row of queue with ordering key key.
	HoldsKey(ctx context.Context, queue, key string) (bool, error)
	// HeldKeys returns, per queue of queues, the ordering keys the outbox holds rows of.
	HeldKeys(ctx context.Context, queues []string) (map[string][]string, error)
}

// PageTx is the transaction of a claimed page (Dialect.ClaimPage) or of Dialect.InTx.
type PageTx interface {
	// KeyIDs returns, for each key of upto, the ids of the outbox rows of its queue and
	// ordering key up to (and including) the id upto gives, in ascending order.
	KeyIDs(ctx context.Context, upto map[OrderKey]int64) (map[OrderKey][]int64, error)
	// Reschedule records a failed publish of row id: attempts+1, lastError, and a
	// next-attempt time delay from now on the database's clock.
	Reschedule(ctx context.Context, id int64, lastError string, delay time.Duration) error
	// Delete deletes the rows ids in one statement.
	Delete(ctx context.Context, ids []int64) error
	// MoveToDeadLetters inserts dl (as Dialect.DeadLetter does) and deletes row id, both or
	// neither, in a savepoint of the page's transaction. refused is the database's refusal of
	// the move (the savepoint was rolled back and the page goes on); err is an error that ends
	// the page (the savepoint could not even be rolled back).
	MoveToDeadLetters(ctx context.Context, id int64, dl *core.DeadLetter) (refused, err error)
}

// Row is an outbox row a Dialect claimed: its id, its failed attempts so far and its batch
// (queue, id, body, exclusive, ordering key, and as Delay what is left of its not-before time;
// the Store reads the rest from the body).
type Row struct {
	// ID is the row id.
	ID int64
	// Attempts counts the row's failed publishes.
	Attempts int
	// Batch is the stored batch.
	Batch core.OutgoingBatch
}

// OrderKey names an ordering key of a queue.
type OrderKey struct {
	// Queue is the queue's name.
	Queue string
	// Key is the ordering key.
	Key string
}

// InspectDialect is implemented by a Dialect that answers the Store's inspection methods
// (ListOutbox, Backlog, DeadLetterCounts) on its database; without it they are refused with
// ErrNeedsPostgres. f.Limit is already defaulted.
type InspectDialect interface {
	// ListOutbox returns the outbox rows f selects by ascending id.
	ListOutbox(ctx context.Context, f OutboxFilter) ([]OutboxRow, error)
	// Backlog returns, per queue with outbox rows, their count and the oldest row's age.
	Backlog(ctx context.Context) (map[string]Backlog, error)
	// DeadLetterCounts returns, per queue, how many dead letters are dead now.
	DeadLetterCounts(ctx context.Context) (map[string]int64, error)
}
