package outbox

import (
	"log/slog"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/optdefault"
	"github.com/txmq/txmq/internal/pgmigrate"
)

// Defaults of Options.
const (
	// DefaultSchema is the schema holding txmq's tables.
	DefaultSchema = pgmigrate.DefaultSchema
	// DefaultRecoveryAge is how old an unscheduled row must be before the sweep takes it over.
	DefaultRecoveryAge = 60 * time.Second
	// DefaultSweepInterval is the period of the recovery sweep (which also runs at Start).
	DefaultSweepInterval = 10 * time.Second
	// DefaultSweepPageSize is how many rows one sweep transaction claims.
	DefaultSweepPageSize = 100
	// DefaultBackoffBase is the delay after a row's first failed publish.
	DefaultBackoffBase = time.Minute
	// DefaultBackoffMax caps the delay between a row's publish attempts.
	DefaultBackoffMax = 10 * time.Minute
	// DefaultPublishTimeout bounds each page of publishes (after commit, relay, sweep).
	DefaultPublishTimeout = 30 * time.Second
	// DefaultMaxAttempts is a row's publish budget: with the default backoff (1 min doubling
	// to 10 min) 20 failed attempts take about 3 hours.
	DefaultMaxAttempts = 20
	// DefaultPollInterval is how often the relay looks for due rows when it has no LISTEN
	// connection (Options.PgBouncer without Options.ListenURL).
	DefaultPollInterval = 250 * time.Millisecond
)

// Options configures a Store. Zero fields mean the documented defaults.
type Options struct {
	// Schema holds the outbox and dead-letter tables. Default "txmq". It must match
	// ^[A-Za-z_][A-Za-z0-9_]{0,49}$ (it also names the NOTIFY channel).
	Schema string
	// Backend is where rows are published. Required by New (not by Migrate).
	Backend core.Backend
	// RecoveryAge is how long a row without a next-attempt time (RunInTx rows in flight, rows
	// handed off by the publish buffer, rows left by a crash) waits before the sweep takes it
	// over. Default 60 s. Give every Store on one schema the same RecoveryAge: the after-commit
	// publishers publish a young RunInTx row without leasing it when this Store's RecoveryAge
	// leaves its sweeps no time to take it first (see RunInTx), so a Store of another process
	// with a shorter one may sweep that row meanwhile and publish it twice (never lose it).
	RecoveryAge time.Duration
	// SweepInterval is the recovery sweep's period; the sweep also runs at once on Start.
	// Default 10 s.
	SweepInterval time.Duration
	// SweepPageSize is how many rows one sweep or relay transaction claims. Default 100.
	SweepPageSize int
	// BackoffBase is the delay after a row's first failed publish, doubling per attempt.
	// Default 1 min.
	BackoffBase time.Duration
	// BackoffMax caps the delay between attempts. Default 10 min.
	BackoffMax time.Duration
	// PublishTimeout bounds the publishes of each claimed page (and each Replay), detached
	// from the caller's cancellation so a cancelled context never strands a
	// published-but-undeleted row. When it runs out (even on a backend that ignores its
	// context), the publish in flight counts a failed attempt, the rows after it are left
	// untried, and the rows published so far are deleted and committed within a further 15 s,
	// so a hung backend never holds row locks for longer. Default 30 s.
	PublishTimeout time.Duration
	// MaxAttempts is each row's publish budget: a row whose publish failed this many times
	// (with errors other than the backend being unavailable, which never count) is moved to
	// the dead-letter table with reason core.ReasonPublishExhausted, replayable. A row the
	// backend refuses permanently (an error wrapping core.ErrRejected: too large, invalid) is
	// dead-lettered at once with reason core.ReasonRejected. Default 20 (about 3 hours with
	// the default backoff).
	MaxAttempts int
	// PgBouncer says the pool goes through PgBouncer (or another pooler) in transaction
	// pooling mode, where a server connection is lent for one transaction only and LISTEN
	// does not work. The store keeps no session state across statements in any case
	// (settings are transaction-local, locks are row locks); what this changes is the relay:
	// it LISTENs on ListenURL when set, and otherwise looks for due rows every PollInterval
	// instead of waiting for NOTIFY. The pool must not use named prepared statements (pgx's
	// default) unless the pooler supports them: set default_query_exec_mode=exec in its URL
	// (txmq.Open does it for a TXMQ_DATABASE_URL with txmq_pgbouncer=true). Default false.
	PgBouncer bool
	// ListenURL is a PostgreSQL URL of the server itself (not a pooler) on which the relay
	// opens its LISTEN connection. Default "": a connection taken from the pool, or with
	// PgBouncer no LISTEN at all (see PollInterval).
	ListenURL string
	// PollInterval is how often the relay looks for due rows when it has no LISTEN
	// connection (PgBouncer without ListenURL): the delay of rows committed by app-managed
	// transactions (WithTx, WithSQLTx). Default 250 ms.
	PollInterval time.Duration
	// Logger receives the store's logs. Default slog.Default().
	Logger *slog.Logger
	// Hooks receives the store's events, for metrics. Optional.
	Hooks *Hooks
}

// Hooks are optional callbacks for metrics. They must be fast; their panics are recovered.
type Hooks struct {
	// Published is called for each outbox row published to the backend, with how it was
	// published: "commit" (after RunInTx's commit), "relay" (NOTIFY) or "sweep".
	Published func(queue string, via string)
	// PublishFailed is called for each failed row publish; unavailable reports an error
	// wrapping core.ErrBackendUnavailable (no attempt counted).
	PublishFailed func(queue string, via string, unavailable bool)
	// DeadLettered is called for each row moved to the dead-letter table by the store itself
	// (reason core.ReasonRejected or core.ReasonPublishExhausted).
	DeadLettered func(queue string, reason string)
}

// withDefaults returns a copy of o (nil allowed) with defaults filled in, or a config error.
func (o *Options) withDefaults() (c Options, err error) {
	if o != nil {
		c = *o
	}
	if c.Schema, err = pgmigrate.Schema("outbox", c.Schema); err != nil {
		return c, err
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if err := optdefault.Fill("outbox",
		optdefault.Field[time.Duration]{Name: "RecoveryAge", V: &c.RecoveryAge, Def: DefaultRecoveryAge},
		optdefault.Field[time.Duration]{Name: "SweepInterval", V: &c.SweepInterval, Def: DefaultSweepInterval},
		optdefault.Field[time.Duration]{Name: "BackoffBase", V: &c.BackoffBase, Def: DefaultBackoffBase},
		optdefault.Field[time.Duration]{Name: "BackoffMax", V: &c.BackoffMax, Def: DefaultBackoffMax},
		optdefault.Field[time.Duration]{Name: "PublishTimeout", V: &c.PublishTimeout, Def: DefaultPublishTimeout},
		optdefault.Field[time.Duration]{Name: "PollInterval", V: &c.PollInterval, Def: DefaultPollInterval},
	); err != nil {
		return c, err
	}
	if err := optdefault.Fill("outbox",
		optdefault.Field[int]{Name: "SweepPageSize", V: &c.SweepPageSize, Def: DefaultSweepPageSize},
		optdefault.Field[int]{Name: "MaxAttempts", V: &c.MaxAttempts, Def: DefaultMaxAttempts},
	); err != nil {
		return c, err
	}
	if c.BackoffMax < c.BackoffBase {
		c.BackoffMax = c.BackoffBase
	}
	return c, nil
}

// polls reports whether the relay polls instead of LISTENing (PgBouncer without ListenURL).
func (o *Options) polls() bool { return o.PgBouncer && o.ListenURL == "" }

// channel is the NOTIFY channel of a schema's outbox.
func channel(schema string) string { return "txmq_outbox_" + schema }

// backoff is the delay before the next attempt after a row's attempts-th failed publish
// (1-based): base doubling per attempt, capped at max.
func backoff(base, max time.Duration, attempts int) time.Duration {
	d := base
	for i := 1; i < attempts && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}
