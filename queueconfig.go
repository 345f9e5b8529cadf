package txmq

import (
	"fmt"
	"regexp"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// Transactional says how a queue's publishes relate to the app's database transaction; see the
// routing table in the package doc.
type Transactional int

const (
	// unsetTransactional is the zero value: a declaration must choose.
	unsetTransactional Transactional = iota
	// Require: inside a transaction the message becomes an outbox row in it; outside, publishing
	// is an error (ErrNoTransaction).
	Require
	// Try: inside a transaction, an outbox row; outside, published immediately.
	Try
	// Never: inside a transaction the message waits in memory for the commit and is then
	// published immediately (dropped on rollback); outside, published immediately. A
	// schedule's ticks are the exception: they are outbox rows of the tick's claim (see
	// Queue.Schedule).
	Never
)

// String returns the mode's name.
func (t Transactional) String() string {
	switch t {
	case Require:
		return "Require"
	case Try:
		return "Try"
	case Never:
		return "Never"
	}
	return fmt.Sprintf("Transactional(%d)", int(t))
}

// Concurrency is a per-node cap on in-flight batches of one queue: a fixed number (Cap) or a
// func re-read at every check (CapFunc). The zero value means no cap.
type Concurrency struct {
	n  int
	fn func() (int, error)
}

// Cap returns a fixed per-node cap of n in-flight batches; n must be > 0.
func Cap(n int) Concurrency { return Concurrency{n: n} }

// CapFunc returns a cap computed by fn at every check, so it can change at run time. A fn that
// panics, returns an error or returns a value <= 0 means no cap for that check.
func CapFunc(fn func() (int, error)) Concurrency { return Concurrency{fn: fn} }

// isSet reports whether a cap was configured.
func (c Concurrency) isSet() bool { return c.n != 0 || c.fn != nil }

// limit evaluates the cap now; Unlimited when there is none.
func (c Concurrency) limit() (n int) {
	if c.fn == nil {
		if c.n > 0 {
			return c.n
		}
		return core.Unlimited
	}
	defer func() {
		if recover() != nil {
			n = core.Unlimited
		}
	}()
	v, err := c.fn()
	if err != nil || v <= 0 {
		return core.Unlimited
	}
	return v
}

// DefaultMaxBatchMessages is the default soft batch size.
const DefaultMaxBatchMessages = 100

// DefaultMaxAttempts is the default retry budget: the listener runs at most this many times.
const DefaultMaxAttempts = 5

// QueueConfig is the closed set of settings of a queue. It is validated at declaration.
type QueueConfig[T any] struct {
	// Transactional is required: Require, Try or Never.
	Transactional Transactional
	// Exclusive allows at most one batch of this queue in flight in the whole cluster.
	// Default false. It cannot be combined with MaxConcurrentBatches, ClusterLimit or
	// KeyLimit. It means what ClusterLimit 1 means, by the backend's older mechanism, and
	// every backend honours it.
	Exclusive bool
	// MaxConcurrentBatches caps in-flight batches of this queue per node (a soft throttle that
	// may overshoot by one or two). Default: no cap. With ClusterLimit both apply: a node runs
	// at most its cap, the cluster at most the limit.
	MaxConcurrentBatches Concurrency
	// ClusterLimit, when positive, allows at most that many batches of this queue in flight
	// in the whole cluster, across every node sharing the backend: the backend enforces it
	// with its own mechanism, as it enforces Exclusive (Exclusive is the limit 1). A batch
	// holds one of the N slots from its claim until it is settled (acked, retried, dropped,
	// dead-lettered) or its lease ends: a node that crashes, pauses or cannot extend its
	// lease fences itself and its slots come back after the lease. Duplicate copies and
	// redeliveries take a slot like any batch. The backend must honour it
	// (core.ClusterLimiter: memory, sqljobs, mysql, redis, sqlite): a node on one that does not refuses
	// the queue, naming it and the setting. Default 0: no cluster-wide limit. It cannot be
	// combined with Exclusive. See "Cluster-wide limits" in docs/guide.md.
	ClusterLimit int
	// KeyLimit, when positive, allows at most that many batches of each fairness key in
	// flight in the whole cluster (the key of FairKey, or the ordering key on an Ordered
	// queue without it, or the empty key: see Fair), so each tenant gets at most N workers
	// however large its backlog, while other keys' batches still run. It needs Fair: true,
	// which stores the key with each batch and hands the keys out in turn, so the batches of
	// a key at its limit wait without holding back the other keys. It combines with
	// ClusterLimit (both hold) and MaxConcurrentBatches, not with Exclusive. The backend must
	// honour it (core.ClusterLimiter and Fair: memory, sqljobs, mysql, redis). Default 0: no limit per key.
	KeyLimit int
	// MaxBatchMessages is the soft target for messages per batch, used to coalesce publishes;
	// default 100. Listeners must not assume it as a hard cap.
	MaxBatchMessages int
	// MaxAttempts is the retry budget: the listener runs at most this many times per batch.
	// Default 5.
	MaxAttempts int
	// Dedup, if set, maps the messages of a batch to the messages to store, before the batch is
	// stored (in the buffer and in the outbox). It must not return more messages than it got.
	Dedup func([]T) []T
	// MaxMessageBytes is the largest encoded (JSON) message a publish on this queue accepts; a
	// larger one fails the publish call with an error wrapping ErrRejected. Default 0: the
	// node's NodeOptions.MaxMessageBytes (1 MiB by default); NoSizeLimit: no library limit for
	// this queue. The backend's own limit (SizeLimiter) always applies.
	MaxMessageBytes int
	// MaxBatchBytes is the soft size limit of an encoded batch of this queue: batches are cut
	// to stay under it (a batch always holds at least one message). Default 0: the node's
	// NodeOptions.MaxBatchBytes (8 MiB by default); NoSizeLimit: no library limit.
	MaxBatchBytes int
	// OnError, if set, is called once per terminal drop (retries exhausted, worker lost, or a
	// Permanent error) with the decoded messages, the last error and the number of runs. It is at-least-once; its
	// panics and errors are logged and swallowed.
	OnError func(msgs []T, err error, attempts int) error
	// Prioritized gives the queue's publishes a priority, MinPriority (0) to MaxPriority (9),
	// higher first, with aging (see "Priorities" in the package doc): the Priority publish
	// option sets it, DefaultPriority otherwise. A ready batch of priority p is claimed before
	// the ready batches of lower priority q that became due less than (p-q)*PriorityAging
	// before it; so a batch waits at most 9*PriorityAging behind higher-priority batches that
	// became due after it, however many keep coming. The backend must honour it
	// (core.Prioritizer: memory, sqljobs, mysql, redis, sqlite): a node on one that does not (sqs,
	// nats) refuses the queue. Default false: Priority on the queue is an error.
	Prioritized bool
	// PriorityAging is a prioritized queue's aging step W: one priority level is worth W of
	// waiting. Default 0: core.DefaultPriorityAging (1s), so the starvation bound is 9s.
	PriorityAging time.Duration
	// DefaultPriority is the priority of a prioritized queue's publishes without the Priority
	// option. Default 0 (MinPriority): the others are promoted above it.
	DefaultPriority int
	// Fair shares the queue's claims round-robin across fairness keys (tenants): every
	// publish carries a key (the FairKey publish option; on an Ordered queue without it, the
	// ordering key; otherwise the empty key, a key like any other), and the backend hands out
	// one ready batch of the next key in turn per claim, so a key with a backlog of any size
	// delays another key's ready batch by at most one batch per key with ready work (K-1
	// batches for K keys). Precedence: per-key order first (only a key's head is ready),
	// then fairness (the turn across fairness keys), then priority with aging (within a
	// fairness key). Publishes of different fairness keys never share a batch. The key
	// travels with the batch through every publish path (direct, RunInTx, WithTx, handoff,
	// sweep, replay, the ledger's republisher, a drain), retries and splits; a schedule's
	// ticks carry the empty key. Exclusive still allows one batch in flight (the turn picks
	// which); a duplicate copy or a redelivery takes its key's turn like any batch. The backend must
	// honour it (core.FairSharer: memory, sqljobs, Redis, MySQL; with Prioritized also
	// core.FairPrioritizer: memory, sqljobs, Redis, MySQL): a node on one that does not
	// refuses the queue.
	// Default false: FairKey on the queue is an error. See "Fair share by key" in
	// docs/guide.md.
	Fair bool
	// Ordered makes the queue keep per-key order: every publish carries a key (the Key
	// publish option; publishing without one is an error naming the queue), a batch holds the
	// messages of one key, and the messages of a key are delivered in the order they were
	// published, one batch per key in flight cluster-wide, a failing batch holding its key
	// back through its retries (see "Ordering" in the package doc). Different keys run in
	// parallel. The backend must enforce it (core.KeyOrderer): a node on a backend that does
	// not refuses the queue. Default false: no order at all.
	Ordered bool
	// IDDedupWindow, when positive, makes caller-supplied message ids (ID, IDs) deduplicate:
	// a message whose id was already published to this queue within the window (counted from
	// that publish, on the backend's clock) is accepted once, whether the copies come from
	// separate calls, separate nodes, a retried flush or the outbox. The backend must support
	// it (core.IDDeduper; each adapter's doc says how, and with what window): a node on one
	// that does not refuses the queue. Messages with generated ids are never checked and pay
	// nothing. Default 0: ids label messages only, and publishing an id twice delivers twice.
	IDDedupWindow time.Duration
	// Unique makes publishes unique by key (a UniqueKey option, a hash of the message, or its
	// caller id) in one of four modes: within a window, until the first one started, until it
	// is done, or debounced (see Unique and "Unique jobs" in docs/guide.md). The backend keeps
	// the keys (core.UniqueKeeper): a node on one that cannot keep the mode refuses the queue,
	// naming it and the mode. Zero (the default): not unique.
	Unique Unique
	// RateLimit caps how many batches of the queue start per period, cluster-wide when the
	// nodes share a Limiter (txmq.Open uses the app database), else per node. Zero: no limit.
	// To limit messages, set MaxBatchMessages to 1.
	RateLimit RateLimit
	// RunTimeout bounds each run of the listener (see "Run timeouts" in the package doc): at
	// the timeout the listener's ctx is cancelled with a cause wrapping ErrRunTimeout, and a
	// listener still running RunTimeoutGrace later is declared failed (logged with its stack,
	// its slot freed, the batch retried or dead-lettered by the retry budget, one run
	// counted). Default 0: DefaultRunTimeout (30 min); NoRunTimeout: runs are never timed out.
	RunTimeout time.Duration
	// RunTimeoutGrace is how long a listener whose ctx the RunTimeout cancelled may take to
	// return before its run is declared failed. Default 0: a tenth of RunTimeout, at most one
	// minute.
	RunTimeoutGrace time.Duration
	// Backoff is the queue's retry delay after the given failed run (1-based), overriding the
	// node's NodeOptions.Backoff for this queue (see "Retries" in the package doc); a listener
	// error made with RetryAfter overrides both for its run. It must be safe for concurrent
	// use; a panic is logged and DefaultBackoff used. Default nil: NodeOptions.Backoff.
	Backoff func(run int) time.Duration
	// ClassifyError, if set, sees the error of each failed run of the queue's listener (and
	// the run number, 1-based) before the retry policy does, and returns the error the policy
	// acts on: the same error, or it marked with Permanent (dead letter now, reason
	// permanent), RetryAfter (its own delay), Snooze or Discard (see "Outcomes" and "Retries"
	// in the package doc). It is how an app sorts the errors it does not make itself (a
	// driver's, an HTTP client's) into those no retry can fix, those worth a longer wait and
	// the rest, in one place per queue, like River's ErrorHandler or Sidekiq's retry_in. It is
	// not asked for a run that lost its lease, a run given back by Close, or a run that
	// returned per-message Results (already decided message by message). Returning nil keeps
	// the error as it was; a panic is logged and the error kept. It must be safe for
	// concurrent use. Default nil: the listener's error as it is.
	ClassifyError func(err error, run int) error
	// RunMiddleware wraps every run of the queue's listener, inside the node's
	// (NodeOptions.RunMiddleware), the first of the slice outermost (see RunMiddleware).
	// Default none: the listener runs as is.
	RunMiddleware []RunMiddleware
	// PublishMiddleware wraps every publish call of the queue, inside the node's
	// (NodeOptions.PublishMiddleware), the first of the slice outermost (see
	// PublishMiddleware). Default none.
	PublishMiddleware []PublishMiddleware
	// MaxSnoozes bounds how many times a message may be snoozed (Snooze, Results.Snooze): the
	// snooze after the last one dead-letters it with reason ReasonSnoozeExhausted, so that an
	// endless snooze cannot loop silently. Default 0: DefaultMaxSnoozes (100).
	MaxSnoozes int
}

// DefaultRunTimeout is a queue's RunTimeout when it sets none: long enough for a batch of
// slow messages (a run handles up to MaxBatchMessages), short enough that a hung listener
// gives its slot, and an Exclusive queue, back within the half hour.
const DefaultRunTimeout = 30 * time.Minute

// NoRunTimeout, as a QueueConfig.RunTimeout, turns run timeouts off for the queue: a run
// lasts as long as its listener, its lease extended the whole time.
const NoRunTimeout time.Duration = -1

// maxDefaultRunGrace bounds the default RunTimeoutGrace.
const maxDefaultRunGrace = time.Minute

// runTimeoutDefaults applies the defaults to a valid RunTimeout and RunTimeoutGrace;
// timeout is NoRunTimeout (and grace 0) when runs are not timed.
func runTimeoutDefaults(timeout, grace time.Duration) (time.Duration, time.Duration) {
	switch {
	case timeout == NoRunTimeout:
		return NoRunTimeout, 0
	case timeout == 0:
		timeout = DefaultRunTimeout
	}
	if grace == 0 {
		grace = min(timeout/10, maxDefaultRunGrace)
	}
	return timeout, grace
}

var queueNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// ValidateQueueName checks the portable queue name rule.
func ValidateQueueName(name string) error {
	if !queueNameRE.MatchString(name) {
		return fmt.Errorf("%w: queue name %q: use 1-64 characters of a-z, 0-9, '_' and '-', starting with a letter (portable to SQS, NATS and Redis)", core.ErrInvalidConfig, name)
	}
	return nil
}

func (c *QueueConfig[T]) validate(name string) error {
	if err := ValidateQueueName(name); err != nil {
		return err
	}
	switch c.Transactional {
	case Require, Try, Never:
	case unsetTransactional:
		return fmt.Errorf("%w: queue %q: Transactional is required: set Require, Try or Never", core.ErrInvalidConfig, name)
	default:
		return fmt.Errorf("%w: queue %q: Transactional %d is not one of Require, Try, Never", core.ErrInvalidConfig, name, int(c.Transactional))
	}
	if c.Exclusive && c.MaxConcurrentBatches.isSet() {
		return fmt.Errorf("%w: queue %q: Exclusive and MaxConcurrentBatches cannot be combined: Exclusive already means one batch in flight cluster-wide; drop one of them", core.ErrInvalidConfig, name)
	}
	if err := checkLimitConfig(name, c.Exclusive, c.Fair, c.ClusterLimit, c.KeyLimit); err != nil {
		return err
	}
	if err := checkUniqueConfig(name, c.Unique, c.Ordered, c.IDDedupWindow); err != nil {
		return err
	}
	if c.MaxConcurrentBatches.fn == nil && c.MaxConcurrentBatches.n < 0 {
		return fmt.Errorf("%w: queue %q: MaxConcurrentBatches is %d; use Cap(n) with n > 0, or leave it unset for no cap", core.ErrInvalidConfig, name, c.MaxConcurrentBatches.n)
	}
	if c.MaxBatchMessages < 0 {
		return fmt.Errorf("%w: queue %q: MaxBatchMessages is %d; it must be > 0 (0 means the default %d)", core.ErrInvalidConfig, name, c.MaxBatchMessages, DefaultMaxBatchMessages)
	}
	for _, s := range []struct {
		name string
		v    int
	}{{"MaxMessageBytes", c.MaxMessageBytes}, {"MaxBatchBytes", c.MaxBatchBytes}} {
		if s.v < 0 && s.v != NoSizeLimit {
			return fmt.Errorf("%w: queue %q: %s is %d; use a size in bytes > 0, 0 for the node's setting, or NoSizeLimit", core.ErrInvalidConfig, name, s.name, s.v)
		}
	}
	if c.MaxMessageBytes > 0 && c.MaxBatchBytes > 0 && c.MaxBatchBytes < c.MaxMessageBytes {
		return fmt.Errorf("%w: queue %q: MaxBatchBytes %d is below MaxMessageBytes %d; a batch must hold one message of the largest size", core.ErrInvalidConfig, name, c.MaxBatchBytes, c.MaxMessageBytes)
	}
	if err := checkPriorityConfig(name, c.Prioritized, c.PriorityAging, c.DefaultPriority); err != nil {
		return err
	}
	if c.IDDedupWindow < 0 {
		return fmt.Errorf("%w: queue %q: IDDedupWindow is %v; use a window > 0 to deduplicate caller ids, or 0 for none", core.ErrInvalidConfig, name, c.IDDedupWindow)
	}
	if c.IDDedupWindow > 0 && c.IDDedupWindow < time.Millisecond {
		return fmt.Errorf("%w: queue %q: IDDedupWindow is %v; use at least 1ms", core.ErrInvalidConfig, name, c.IDDedupWindow)
	}
	if c.MaxSnoozes < 0 {
		return fmt.Errorf("%w: queue %q: MaxSnoozes is %d; it must be > 0 (0 means the default %d)", core.ErrInvalidConfig, name, c.MaxSnoozes, DefaultMaxSnoozes)
	}
	if c.MaxAttempts < 0 {
		return fmt.Errorf("%w: queue %q: MaxAttempts is %d; it must be > 0 (0 means the default %d)", core.ErrInvalidConfig, name, c.MaxAttempts, DefaultMaxAttempts)
	}
	if c.RunTimeout < 0 && c.RunTimeout != NoRunTimeout || c.RunTimeout > 0 && c.RunTimeout < time.Millisecond {
		return fmt.Errorf("%w: queue %q: RunTimeout is %v; use at least 1ms, 0 for the default %v, or NoRunTimeout", core.ErrInvalidConfig, name, c.RunTimeout, DefaultRunTimeout)
	}
	if c.RunTimeoutGrace < 0 {
		return fmt.Errorf("%w: queue %q: RunTimeoutGrace is %v; use a duration > 0, or 0 for a tenth of RunTimeout (at most 1m)", core.ErrInvalidConfig, name, c.RunTimeoutGrace)
	}
	if c.RunTimeout == NoRunTimeout && c.RunTimeoutGrace != 0 {
		return fmt.Errorf("%w: queue %q: RunTimeoutGrace %v is set with NoRunTimeout; drop one of them", core.ErrInvalidConfig, name, c.RunTimeoutGrace)
	}
	if r := c.RateLimit; r != (RateLimit{}) && (r.Batches <= 0 || r.Per <= 0 || r.Burst < 0) {
		return fmt.Errorf("%w: queue %q: RateLimit %+v: set Batches > 0 and Per > 0 (Burst >= 0, 0 means Batches), or leave it zero for no limit", core.ErrInvalidConfig, name, r)
	}
	return nil
}

// DefaultBackoff is the retry delay after the given failed run (1-based): 1 s doubling per run,
// at most 10 min, with ±20% jitter.
func DefaultBackoff(run int) time.Duration {
	return ExponentialBackoff(time.Second, 10*time.Minute)(run)
}

// ExponentialBackoff returns a backoff that waits base after the first failed run, doubling per
// run up to limit, with ±20% jitter (never below 80% of the unjittered value).
func ExponentialBackoff(base, limit time.Duration) func(run int) time.Duration {
	return engine.Backoff(base, limit)
}
