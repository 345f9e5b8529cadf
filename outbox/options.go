package outbox

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/pgmigrate"
)

// Defaults of Options.
const (
	// DefaultSchema is the schema holding txmq's tables.
	DefaultSchema = "txmq"
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
	// over. Default 60 s.
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
func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if !pgmigrate.ValidSchema(c.Schema) {
		return c, fmt.Errorf("%w: outbox: Options.Schema %q: use 1-50 characters of letters, digits and '_', not starting with a digit", core.ErrInvalidConfig, c.Schema)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"RecoveryAge", &c.RecoveryAge, DefaultRecoveryAge},
		{"SweepInterval", &c.SweepInterval, DefaultSweepInterval},
		{"BackoffBase", &c.BackoffBase, DefaultBackoffBase},
		{"BackoffMax", &c.BackoffMax, DefaultBackoffMax},
		{"PublishTimeout", &c.PublishTimeout, DefaultPublishTimeout},
	} {
		if *d.v < 0 {
			return c, fmt.Errorf("%w: outbox: Options.%s is %v; it must be >= 0 (0 means the default %v)", core.ErrInvalidConfig, d.name, *d.v, d.def)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.SweepPageSize < 0 {
		return c, fmt.Errorf("%w: outbox: Options.SweepPageSize is %d; it must be > 0 (0 means the default %d)", core.ErrInvalidConfig, c.SweepPageSize, DefaultSweepPageSize)
	}
	if c.MaxAttempts < 0 {
		return c, fmt.Errorf("%w: outbox: Options.MaxAttempts is %d; it must be > 0 (0 means the default %d)", core.ErrInvalidConfig, c.MaxAttempts, DefaultMaxAttempts)
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.SweepPageSize == 0 {
		c.SweepPageSize = DefaultSweepPageSize
	}
	if c.BackoffMax < c.BackoffBase {
		c.BackoffMax = c.BackoffBase
	}
	return c, nil
}

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
