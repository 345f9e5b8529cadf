package mysql

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/optdefault"
)

// Defaults of Options.
const (
	// DefaultQueryTimeout bounds every statement and transaction the Backend runs.
	DefaultQueryTimeout = 10 * time.Second
	// DefaultAbandonedAfter is how long a queue must go unfetched by every node before the
	// reaper takes its old batches.
	DefaultAbandonedAfter = 7 * 24 * time.Hour
	// DefaultReapInterval is the reaper's period (it also runs when the Backend starts).
	DefaultReapInterval = time.Hour
	// DefaultReapBatch is how many batches one reaper transaction takes.
	DefaultReapBatch = 100
	// DefaultSettleWindow is how long a settle (or a plain publish) waits for others to share
	// its transaction while one is already running.
	DefaultSettleWindow = time.Millisecond
	// DefaultSettleBatch is how many settles (or plain publishes) one transaction takes at
	// most.
	DefaultSettleBatch = 100
	// DefaultPollInterval is how often a waiting Fetch claims again when no publish of this
	// Backend woke it: MySQL has no NOTIFY, so batches published by other processes are found
	// by polling.
	DefaultPollInterval = 100 * time.Millisecond
	// maxHeartbeatInterval is the longest a queue's heartbeat goes unwritten while fetched.
	maxHeartbeatInterval = time.Minute
)

// ReasonAbandoned is the DeadLetter.Reason of batches the reaper hands to Options.DeadLetters.
const ReasonAbandoned = core.ReasonAbandoned

// schemaPattern is what Options.Schema must match (a database name quoted as an identifier).
var schemaPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// Options configures a Backend and Migrate. A nil *Options, and every zero field, means the
// default documented on the field.
type Options struct {
	// Schema is the database (MySQL's word for a schema) holding the jobs tables. Default "":
	// the connection's own database (the DSN's /dbname). When set it must match
	// ^[A-Za-z_][A-Za-z0-9_]{0,63}$; Migrate creates it when missing.
	Schema string

	// QueryTimeout bounds every statement and transaction, detached from the caller's
	// cancellation where a claim could otherwise be stranded (Fetch). An unreachable database
	// therefore fails a call within about QueryTimeout. Default 10 s.
	QueryTimeout time.Duration

	// SettleWindow groups concurrent Acks and Drops (and, separately, Extends, and plain
	// Publishes) into one transaction: when one of the kind is already running, a new one
	// waits up to SettleWindow, or until SettleBatch calls are pending, for others to join it;
	// when none is running it goes at once. A Publish waits no longer than the statement it
	// found running, and only a plain one is grouped: no DedupWindow, Unique or ordering Key,
	// and a body of at most 64 KiB (less when max_allowed_packet could not carry SettleBatch
	// of them twice over). Each call still returns only its own outcome. Default 1 ms; a
	// negative value runs one per call.
	SettleWindow time.Duration

	// SettleBatch is the most calls one grouped transaction takes (claims settled or
	// extended, batches published). Default 100; 1 turns grouping off.
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
	if c.Schema != "" && !schemaPattern.MatchString(c.Schema) {
		return c, fmt.Errorf("%w: mysql: Options.Schema %q must match %s (a database name)", core.ErrInvalidConfig, c.Schema, schemaPattern)
	}
	if err := optdefault.Fill("mysql",
		optdefault.Field[time.Duration]{Name: "QueryTimeout", V: &c.QueryTimeout, Def: DefaultQueryTimeout},
		optdefault.Field[time.Duration]{Name: "AbandonedAfter", V: &c.AbandonedAfter, Def: DefaultAbandonedAfter},
		optdefault.Field[time.Duration]{Name: "PollInterval", V: &c.PollInterval, Def: DefaultPollInterval},
	); err != nil {
		return c, err
	}
	if err := optdefault.Fill("mysql",
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
