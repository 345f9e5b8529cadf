package sqljobs

import (
	"log/slog"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/optdefault"
	"github.com/txmq/txmq/internal/pgmigrate"
)

// Defaults of Options.
const (
	// DefaultSchema is the schema holding the jobs tables, the same as the outbox's.
	DefaultSchema = pgmigrate.DefaultSchema
	// DefaultQueryTimeout bounds every statement the Backend runs.
	DefaultQueryTimeout = 10 * time.Second
	// DefaultAbandonedAfter is how long a queue must go unfetched by every node before the
	// reaper takes its old batches.
	DefaultAbandonedAfter = 7 * 24 * time.Hour
	// DefaultReapInterval is the reaper's period (it also runs when the Backend starts).
	DefaultReapInterval = time.Hour
	// DefaultReapBatch is how many batches one reaper transaction takes.
	DefaultReapBatch = 100
	// DefaultSettleWindow is how long a settle (or a plain publish) waits for others to share
	// its statement while one is already running.
	DefaultSettleWindow = time.Millisecond
	// DefaultSettleBatch is how many settles (or plain publishes) one statement takes at most.
	DefaultSettleBatch = 100
	// DefaultPollInterval is how often a waiting Fetch claims again when the Backend has no
	// LISTEN connection (Options.PgBouncer without Options.ListenURL).
	DefaultPollInterval = 100 * time.Millisecond
	// maxHeartbeatInterval is the longest a queue's heartbeat goes unwritten while fetched.
	maxHeartbeatInterval = time.Minute
)

// ReasonAbandoned is the DeadLetter.Reason of batches the reaper hands to Options.DeadLetters.
const ReasonAbandoned = core.ReasonAbandoned

// Options configures a Backend and Migrate. A nil *Options, and every zero field, means the
// default documented on the field.
type Options struct {
	// Schema holds the jobs tables. Default "txmq" (the outbox's schema). It must match
	// ^[A-Za-z_][A-Za-z0-9_]{0,49}$ because it also names the NOTIFY channel.
	Schema string

	// QueryTimeout bounds every statement, detached from the caller's cancellation where a
	// claim could otherwise be stranded (Fetch). An unreachable database therefore fails a call
	// within about QueryTimeout (sooner when the connection is refused). Default 10 s.
	QueryTimeout time.Duration

	// SettleWindow groups concurrent Acks and Drops (and, separately, Extends, and plain
	// Publishes) into one statement: when a statement of the kind is already running, a new
	// one waits up to SettleWindow, or until SettleBatch calls are pending, for others to join
	// it; when none is running it goes at once. A Publish waits no longer than the statement
	// it found running, and only a plain one is grouped: no DedupWindow, Unique or ordering
	// Key, and a body of at most 64 KiB. Each call still returns only its own outcome.
	// Default 1 ms; a negative value runs one statement per call.
	SettleWindow time.Duration

	// SettleBatch is the most calls one grouped statement takes (claims settled or extended,
	// batches published). Default 100; 1 turns grouping off.
	SettleBatch int

	// DurableSettles makes claims, Acks, Drops and Extends wait for their commit to be flushed
	// like any other transaction. By default they commit with synchronous_commit = off
	// (Publish and Retry never do, nor claims and extensions of Exclusive queues, whose lock
	// must survive a crash): a database crash may then forget the last fraction of a
	// second of them, which at-least-once delivery absorbs (a forgotten claim or extension is
	// a lease that ran out, a forgotten Ack a batch delivered again), and in exchange a settle
	// does not wait for a WAL flush.
	DurableSettles bool

	// AbandonedAfter is how long a queue may go without any node fetching it before the
	// reaper takes batches of it that are older than this too. Default 7 days. Fetch records a
	// heartbeat per queue at most every min(1 min, AbandonedAfter/4).
	AbandonedAfter time.Duration

	// ReapInterval is the reaper's period; it also runs once as soon as the Backend is made.
	// Default 1 h; a negative value turns the reaper off in this Backend.
	ReapInterval time.Duration

	// ReapBatch is how many batches one reaper transaction takes. Default 100.
	ReapBatch int

	// DeadLetters receives abandoned batches (reason ReasonAbandoned), which are then deleted.
	// Default nil: abandoned batches are left in place, logged and counted, never deleted.
	DeadLetters core.DeadLetterSink

	// PgBouncer says the pool goes through PgBouncer (or another pooler) in transaction
	// pooling mode, where a server connection is lent for one transaction only. The Backend
	// keeps no state across statements in any case (each claim, settle and publish is one
	// statement, or one pipelined implicit transaction, with transaction-local settings); what
	// this changes is the wake-ups: LISTEN does not work through such a pooler, so the Backend
	// opens its LISTEN connection on ListenURL when it is set, and otherwise waiting fetches
	// claim again every PollInterval. The pool itself must not use named prepared statements
	// (pgx's default) unless the pooler supports them (PgBouncer >= 1.21 with
	// max_prepared_statements > 0): set default_query_exec_mode=exec in its URL (a
	// postgres:// backend URL with txmq_pgbouncer=true does it). Default false.
	PgBouncer bool

	// ListenURL is a PostgreSQL URL of the server itself (not a pooler) on which the Backend
	// opens its one LISTEN connection. Default "": the pool's connection settings, or with
	// PgBouncer no LISTEN connection at all (polling, see PollInterval).
	ListenURL string

	// PollInterval is how often a waiting Fetch claims again when the Backend has no LISTEN
	// connection (PgBouncer without ListenURL). Default 100 ms. Each poll is one claim
	// statement per waiting node.
	PollInterval time.Duration

	// Logger receives the Backend's logs (listener reconnects, the reaper). Default
	// slog.Default().
	Logger *slog.Logger
}

// withDefaults returns a copy of o (nil allowed) with the defaults filled in, or an error
// wrapping core.ErrInvalidConfig.
func (o *Options) withDefaults() (c Options, err error) {
	if o != nil {
		c = *o
	}
	if c.Schema, err = pgmigrate.Schema("sqljobs", c.Schema); err != nil {
		return c, err
	}
	if err := optdefault.Fill("sqljobs",
		optdefault.Field[time.Duration]{Name: "QueryTimeout", V: &c.QueryTimeout, Def: DefaultQueryTimeout},
		optdefault.Field[time.Duration]{Name: "AbandonedAfter", V: &c.AbandonedAfter, Def: DefaultAbandonedAfter},
		optdefault.Field[time.Duration]{Name: "PollInterval", V: &c.PollInterval, Def: DefaultPollInterval},
	); err != nil {
		return c, err
	}
	if err := optdefault.Fill("sqljobs",
		optdefault.Field[int]{Name: "ReapBatch", V: &c.ReapBatch, Def: DefaultReapBatch},
		optdefault.Field[int]{Name: "SettleBatch", V: &c.SettleBatch, Def: DefaultSettleBatch},
	); err != nil {
		return c, err
	}
	if c.SettleWindow == 0 {
		c.SettleWindow = DefaultSettleWindow
	}
	if c.ReapInterval == 0 {
		c.ReapInterval = DefaultReapInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// polls reports whether waiting fetches poll instead of waiting for NOTIFY.
func (o *Options) polls() bool { return o.PgBouncer && o.ListenURL == "" }

// heartbeatInterval is how often Fetch refreshes a queue's heartbeat.
func (o *Options) heartbeatInterval() time.Duration {
	return min(maxHeartbeatInterval, o.AbandonedAfter/4)
}

// channel is the NOTIFY channel of a schema's jobs.
func channel(schema string) string { return "txmq_jobs_" + schema }
