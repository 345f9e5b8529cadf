package sqlite

import (
	"log/slog"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/optdefault"
)

// Defaults of Options.
const (
	// DefaultQueryTimeout bounds every statement and transaction the Backend runs, including
	// the wait for the file's write lock.
	DefaultQueryTimeout = 10 * time.Second
	// DefaultBusyTimeout is how long a connection Open makes waits for another process's
	// write lock on the file before the statement fails (PRAGMA busy_timeout).
	DefaultBusyTimeout = 5 * time.Second
	// DefaultAbandonedAfter is how long a queue must go unfetched by every node before the
	// reaper takes its old batches.
	DefaultAbandonedAfter = 7 * 24 * time.Hour
	// DefaultReapInterval is the reaper's period (it also runs when the Backend starts).
	DefaultReapInterval = time.Hour
	// DefaultReapBatch is how many batches one reaper transaction takes.
	DefaultReapBatch = 100
	// DefaultSettleWindow is how long a settle waits for others to share its transaction
	// while one is already running.
	DefaultSettleWindow = time.Millisecond
	// DefaultSettleBatch is how many settles (or plain publishes) one transaction takes at
	// most.
	DefaultSettleBatch = 100
	// DefaultPollInterval is how often a waiting Fetch claims again when no publish of this
	// Backend woke it: SQLite has no NOTIFY, so batches published by other processes are
	// found by polling.
	DefaultPollInterval = 100 * time.Millisecond
	// maxHeartbeatInterval is the longest a queue's heartbeat goes unwritten while fetched.
	maxHeartbeatInterval = time.Minute
)

// ReasonAbandoned is the DeadLetter.Reason of batches the reaper hands to Options.DeadLetters.
const ReasonAbandoned = core.ReasonAbandoned

// Options configures a Backend. A nil *Options, and every zero field, means the default
// documented on the field.
type Options struct {
	// QueryTimeout bounds every statement and transaction, including the wait for the file's
	// write lock, detached from the caller's cancellation where a claim could otherwise be
	// stranded (Fetch). Default 10 s.
	QueryTimeout time.Duration

	// BusyTimeout is the PRAGMA busy_timeout of the connections Open makes: how long a
	// statement waits for another process's write lock before it fails with SQLITE_BUSY
	// (an error wrapping core.ErrBackendUnavailable). Default 5 s. New does not change the
	// connections of a *sql.DB it is given: open it with _pragma=busy_timeout(5000).
	BusyTimeout time.Duration

	// SettleWindow groups concurrent Acks and Drops (and, separately, Extends, and plain
	// Publishes) into one transaction: when one of the kind is already running, a new one
	// waits up to SettleWindow, or until SettleBatch claims are pending, for others to join it
	// (a publish no longer than the statement it found running); when none is running it goes
	// at once. Each call still returns only its own outcome. Default 1 ms; a negative value
	// runs one per call.
	SettleWindow time.Duration

	// SettleBatch is the most claims one grouped transaction settles (and the most plain
	// batches one grouped INSERT stores). Default 100; 1 turns grouping off.
	SettleBatch int

	// PollInterval is how often a waiting Fetch claims again. A publish or retry through this
	// Backend wakes its own waiting fetches at once; other processes' publishes are found at
	// the next poll. Default 100 ms: each poll is one claim transaction per waiting node.
	PollInterval time.Duration

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

	// Logger receives the Backend's logs (the reaper, heartbeat failures). Default
	// slog.Default().
	Logger *slog.Logger
}

// withDefaults returns a copy of o (nil allowed) with the defaults filled in, or an error
// wrapping core.ErrInvalidConfig.
func (o *Options) withDefaults() (c Options, err error) {
	if o != nil {
		c = *o
	}
	if err := optdefault.Fill("sqlite",
		optdefault.Field[time.Duration]{Name: "QueryTimeout", V: &c.QueryTimeout, Def: DefaultQueryTimeout},
		optdefault.Field[time.Duration]{Name: "BusyTimeout", V: &c.BusyTimeout, Def: DefaultBusyTimeout},
		optdefault.Field[time.Duration]{Name: "AbandonedAfter", V: &c.AbandonedAfter, Def: DefaultAbandonedAfter},
		optdefault.Field[time.Duration]{Name: "PollInterval", V: &c.PollInterval, Def: DefaultPollInterval},
	); err != nil {
		return c, err
	}
	if err := optdefault.Fill("sqlite",
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

// heartbeatInterval is how often Fetch refreshes a queue's heartbeat.
func (o *Options) heartbeatInterval() time.Duration {
	return min(maxHeartbeatInterval, o.AbandonedAfter/4)
}
