package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
)

// Backend is a core.Backend on Redis. It is safe for concurrent use; every Backend (in this
// process or another) with the same Prefix on the same server (or Redis Cluster) shares its
// queues. The zero
// value is not usable: call New or open a redis:// URL.
type Backend struct {
	rdb         goredis.UniversalClient
	ownClient   bool
	keys        keyCache
	callTimeout time.Duration
	idleRecheck time.Duration
	log         *slog.Logger
	wake        *waker
	settles     *settleBatcher
	limit       sizeLimit

	closed    atomic.Bool
	closeOnce sync.Once
	done      chan struct{} // closed by Close; wakes waiting fetches
}

var _ core.Backend = (*Backend)(nil)

// New returns a Backend configured by opts (nil means every default). It does no I/O: an
// unreachable server shows up as errors wrapping core.ErrBackendUnavailable from the calls,
// which the engine turns into retries and outbox hand-offs.
func New(opts *Options) (*Backend, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	rdb, own := o.Client, false
	if rdb == nil {
		rdb, own = o.newClient(), true
	}
	return newBackend(rdb, own, o), nil
}

// newBackend wraps rdb; own says whether Close closes it. o has its defaults set.
func newBackend(rdb goredis.UniversalClient, own bool, o Options) *Backend {
	be := &Backend{
		rdb:         rdb,
		ownClient:   own,
		keys:        keyCache{prefix: o.Prefix},
		callTimeout: o.CallTimeout,
		idleRecheck: o.IdleRecheck,
		log:         o.Logger,
		done:        make(chan struct{}),
	}
	if o.GoRedisLogs {
		routeGoRedisLogs(o.Logger)
	}
	be.limit.init(o.MaxBatchBytes)
	be.wake = newWaker(rdb, o.Logger)
	be.settles = newSettleBatcher(be)
	return be
}

// Prefix returns the key prefix of this Backend's keys.
func (be *Backend) Prefix() string { return be.keys.prefix }

// Client returns the go-redis client the Backend uses, for inspection and tests.
func (be *Backend) Client() goredis.UniversalClient { return be.rdb }

// Publish stores the batch, claimable once its delay (b.DelayFrom) has passed. The due time is
// the server's TIME plus the delay, rounded up to the millisecond, so a skewed client clock
// cannot make a batch due early or late. Publishing an id that is already stored
// is a no-op, but for a deliberate re-publish (b.PublishID set: a dead-letter replay) with
// another body: the queue keeps one batch per id, so that is refused with core.ErrStillStored
// (see republish).
func (be *Backend) Publish(ctx context.Context, b core.OutgoingBatch) error {
	if err := be.usable("publish", b.Queue); err != nil {
		return err
	}
	if b.Queue == "" {
		return fmt.Errorf("%w: redis: publish batch %s: the queue name is empty; pass the declared queue name", core.ErrInvalidConfig, b.ID)
	}
	if b.ID == "" {
		return fmt.Errorf("%w: redis: publish to queue %q: the batch id is empty; use core.NewID", core.ErrInvalidConfig, b.Queue)
	}
	var delayMs int64
	if d := b.DelayFrom(time.Now()); d > 0 {
		delayMs = int64((d + time.Millisecond - 1) / time.Millisecond)
	}
	what := fmt.Sprintf("publish batch %s to queue %q", b.ID, b.Queue)
	if err := be.checkSize(ctx, what, len(b.Body)); err != nil {
		return err
	}
	k := be.keys.keys(b.Queue)
	var err error
	switch {
	case b.Unique.Mode != 0:
		if err = be.publishUnique(ctx, k, b, delayMs); errors.As(err, new(*core.UniqueError)) {
			return err
		}
	case b.DedupWindow > 0:
		err = be.publishDedup(ctx, k, b, delayMs)
	case b.PublishID != "":
		if err = be.republish(ctx, k, b, delayMs); errors.Is(err, core.ErrStillStored) {
			return err
		}
	default:
		err = publishScript.Run(ctx, be.rdb, k.script, b.ID, b.Body, delayMs, k.wake, b.Key, leadMs(b.Lead), fairKeyArg(b)).Err()
	}
	var dup *core.DuplicateError
	if errors.As(err, &dup) {
		return err
	}
	if err != nil && !rejected(err) && unavailable(err) && len(b.Body) > minBulkLimit {
		// Redis closes the connection of a command over proto-max-bulk-len, which can look
		// like an outage; if the server answers and its limit is below this body, it is not.
		if serr := be.recheckSize(ctx, what, len(b.Body)); serr != nil {
			return serr
		}
	}
	return be.wrap(what, err)
}

// Depths reports the ready, in-flight and delayed batches of each named queue, at the server's
// now, in one round trip; a queue never used reports zeros. An expired lease not yet reclaimed
// counts as ready. OldestReady is the lowest due time (a lease end for an expired lease) among
// the ready batches, on the server's clock.
func (be *Backend) Depths(ctx context.Context, queues []string) (map[string]core.Depth, error) {
	if err := be.usable("depths", ""); err != nil {
		return nil, err
	}
	out := make(map[string]core.Depth, len(queues))
	if len(queues) == 0 {
		return out, nil
	}
	cmds, err := be.runScripts(ctx, depthScript, len(queues), func(i int) ([]string, []any) {
		return be.keys.keys(queues[i]).script, nil
	})
	if err != nil {
		return nil, be.wrap(fmt.Sprintf("depths of %d queue(s)", len(queues)), err)
	}
	for i, q := range queues {
		vals, err := cmds[i].Int64Slice()
		if err != nil || len(vals) != 4 {
			return nil, be.wrap(fmt.Sprintf("depths of queue %q", q), fmt.Errorf("unexpected reply %v: %v", cmds[i].Val(), err))
		}
		d := core.Depth{Ready: vals[0], InFlight: vals[1], Delayed: vals[2]}
		if vals[3] >= 0 && d.Ready > 0 {
			d.OldestReady = time.UnixMilli(vals[3])
		}
		out[q] = d
	}
	return out, nil
}

// Close wakes waiting fetches, stops the wake-up subscription and, when the Backend made its
// own client, closes it. Batches stay stored. Later calls fail with errors wrapping
// core.ErrClosed. Closing twice is a no-op.
func (be *Backend) Close() error {
	var err error
	be.closeOnce.Do(func() {
		be.closed.Store(true)
		close(be.done)
		be.wake.close()
		if be.ownClient {
			err = be.rdb.Close()
		}
	})
	return err
}

// usable returns the error for a call made after Close.
func (be *Backend) usable(op, queue string) error {
	if !be.closed.Load() {
		return nil
	}
	where := op
	if queue != "" {
		where = fmt.Sprintf("%s (queue %q)", op, queue)
	}
	return fmt.Errorf("redis: %s: the backend was closed; open a new one: %w", where, core.ErrClosed)
}

// wrap classifies err (see wrapErr), reporting core.ErrClosed once Close was called.
func (be *Backend) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if be.closed.Load() {
		return fmt.Errorf("redis: %s: the backend was closed: %w (%w)", what, core.ErrClosed, err)
	}
	if unavailable(err) {
		reloadSlots(be.rdb)
	}
	return wrapErr(what, err)
}

// reloadSlots asks a cluster client to reload the cluster's slot map, in the background (go-redis
// runs one reload at a time and folds the requests that arrive meanwhile into the next), after a
// call failed like an outage. go-redis reloads it by itself on a MOVED or ASK reply, but not when
// a master stops answering: it would keep sending that master's slots to the dead address until
// its ClusterStateReloadInterval (60 s) has passed, leaving the replica promoted in its place
// unused all that time (measured: the queues of a killed master stalled until its address
// answered again). On a single-server client it does nothing.
func reloadSlots(rdb goredis.UniversalClient) {
	if cc, ok := rdb.(*goredis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}

// runScripts runs script n times in one pipelined round trip, call i with the keys and args
// that args(i) returns, and returns the commands in order. Scripts missing from the server's
// cache (NOSCRIPT: a restart or SCRIPT FLUSH) run again with EVAL, which caches them for the
// next EVALSHA; a script that failed with NOSCRIPT did not run, so this never runs one twice.
// The returned error is the pipeline's first error; each command carries its own.
func (be *Backend) runScripts(ctx context.Context, script *goredis.Script, n int, args func(i int) ([]string, []any)) ([]*goredis.Cmd, error) {
	cmds := make([]*goredis.Cmd, n)
	if n == 1 {
		keys, a := args(0)
		cmds[0] = script.Run(ctx, be.rdb, keys, a...)
		return cmds, ignoreNil(cmds[0].Err())
	}
	pipe := be.rdb.Pipeline()
	for i := range n {
		keys, a := args(i)
		cmds[i] = script.EvalSha(ctx, pipe, keys, a...)
	}
	_, err := pipe.Exec(ctx)
	if err == nil {
		return cmds, nil
	}
	var missing []int
	for i, c := range cmds {
		if goredis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return cmds, ignoreNil(err)
	}
	pipe = be.rdb.Pipeline()
	for _, i := range missing {
		keys, a := args(i)
		cmds[i] = script.Eval(ctx, pipe, keys, a...)
	}
	_, _ = pipe.Exec(ctx)
	for _, c := range cmds {
		if err := ignoreNil(c.Err()); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

// ignoreNil drops goredis.Nil, which no script returns but a pipeline may report.
func ignoreNil(err error) error {
	if err == goredis.Nil {
		return nil
	}
	return err
}
