package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core"
)

// Options configures an engine; txmq.NewNode builds them from txmq.NodeOptions, whose
// fields document each setting and its default. Every zero field means that default.
type Options struct {
	// Specs finds the declared queues (txmq.Registry). Required.
	Specs Specs
	// Handoff takes buffered flushes the backend refused (the outbox); nil: dropped.
	Handoff core.Handoff
	// DeadLetters stores dropped batches; nil: logged and counted only.
	DeadLetters core.DeadLetterSink
	// Logger receives the logs. Default slog.Default().
	Logger *slog.Logger
	// Hooks receives events for metrics.
	Hooks Hooks
	// Clock tells time to the buffer and the schedules. Default the system clock.
	Clock Clock
	// ID names the node as lease owner. Default a new random id.
	ID string
	// Lease, PollWait, FetchMax, Backoff, FlushWindow, FlushCap, FlushTick, ClaimTimeout and
	// CloseFlushTimeout are txmq.NodeOptions' settings of the same names.
	Lease, PollWait                  time.Duration
	FetchMax                         int
	Backoff                          func(run int) time.Duration
	FlushWindow, FlushCap, FlushTick time.Duration
	ClaimTimeout, CloseFlushTimeout  time.Duration
	// Features are the optional behaviours plugged in (pause, rate limit, schedules, tracing): each
	// implements some of the extension points of extend.go.
	Features []any
	// CloseLogEvery is how often Close logs what it still waits for. Default 5s.
	CloseLogEvery time.Duration
	// MaxMessageBytes and MaxBatchBytes are the size limits (0: defaults; NoSizeLimit: none).
	MaxMessageBytes, MaxBatchBytes int
}

// Specs finds the queues declared for the engine (txmq.Registry).
type Specs interface {
	// Lookup returns the spec of the queue declared as name, or nil.
	Lookup(name string) *Spec
	// Names returns the declared queue names, sorted.
	Names() []string
}

// Engine is one running node's machinery: it publishes through a coalescing buffer and, once
// started, fetches and runs batches for the queues it listens to. Many engines may share one
// backend. txmq.Node is its facade.
type Engine struct {
	id      string
	opts    Options
	backend core.Backend
	specs   Specs
	log     *slog.Logger
	hooks   Hooks
	clock   Clock
	stats   counters
	// orderErr is why the backend does not enforce per-key order (core.OrdersKeys), nil when
	// it does: an Ordered queue is refused on this node with it.
	orderErr error
	// prioErr is why the backend does not honour priorities (core.Prioritizes), nil when it
	// does: a prioritized queue is refused on this node with it (priority.go).
	prioErr error
	// fairErr is why the backend does not share claims fairly by key (core.SharesFairly),
	// nil when it does: a fair queue is refused on this node with it (fair.go).
	fairErr error
	// fairPrioErr is why the backend does not rank a fair queue by priority within a key
	// (core.SharesFairlyByPriority): a queue both Fair and Prioritized is refused with it.
	fairPrioErr error
	// limitErr is why the backend does not enforce cluster-wide concurrency limits
	// (core.LimitsClaims), nil when it does: a queue with a ClusterLimit or KeyLimit is
	// refused on this node with it (clusterlimit.go).
	limitErr error
	// onePerBatch: the backend deduplicates whole batches (core.DedupSupport), so each
	// message whose caller id deduplicates gets a batch of its own.
	onePerBatch bool

	pub publisher // the publish buffer and its writes
	drv driver    // fetching, slots and step-back
	run runner    // the worker pool, fences, extensions, the policy, terminal memory

	// The features, by extension point (extend.go); set by New, read-only after.
	gates     []Gate
	admitter  Admitter
	preparers []Preparer
	loopers   []Looper
	writers   []Writer
	tracing   Tracing
	recorder  Recorder
	checkers  []SpecChecker
	publishFn PublishFunc // the backend's Publish, wrapped by the PublishWrappers

	// The lifecycle: stopCtx is done when the node stops fetching (Close, Halt); closeDone
	// is closed when the first Close (or Halt) has finished; loops counts the background
	// loops (driver, lease loop, flusher, features' loops) that Close waits for.
	stopCtx     context.Context
	stop        context.CancelFunc
	closeDone   chan struct{}
	closeDoneFn func()
	halted      atomic.Bool // Halt: a simulated crash, nothing settles any more
	frozen      atomic.Bool // Freeze: no fetch or extension until Thaw
	closing     atomic.Bool // Close began: a cancelled run is given back unspent
	loops       sync.WaitGroup
}

// New returns an engine on backend with o (defaults applied here). Publishing works at once;
// Listen for each queue served, then Start to begin fetching.
func New(backend core.Backend, o Options) (*Engine, error) {
	if backend == nil {
		return nil, fmt.Errorf("%w: NewNode needs a backend (for example memory.New(nil), or txmq.OpenBackend(ctx, url))", core.ErrInvalidConfig)
	}
	if o.Specs == nil {
		return nil, fmt.Errorf("%w: engine.New needs Options.Specs", core.ErrInvalidConfig)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if o.ID == "" {
		o.ID = core.NewID()
	}
	setDefault(&o.Lease, core.DefaultLease)
	if h, ok := backend.(core.PollWaitHinter); ok && o.PollWait <= 0 {
		o.PollWait = h.PollWaitHint()
	}
	setDefault(&o.PollWait, time.Second)
	setDefault(&o.FlushWindow, 20*time.Millisecond)
	setDefault(&o.FlushCap, 100*time.Millisecond)
	setDefault(&o.FlushTick, 10*time.Millisecond)
	setDefault(&o.ClaimTimeout, 10*time.Second)
	setDefault(&o.CloseFlushTimeout, 15*time.Second)
	setDefault(&o.CloseLogEvery, defaultCloseLogEvery)
	if o.FetchMax <= 0 {
		o.FetchMax = core.DefaultFetchMax
	}
	if o.Backoff == nil {
		o.Backoff = defaultBackoff
	}
	for _, s := range []struct {
		name string
		v    *int
		def  int
	}{{"MaxMessageBytes", &o.MaxMessageBytes, DefaultMaxMessageBytes}, {"MaxBatchBytes", &o.MaxBatchBytes, DefaultMaxBatchBytes}} {
		if *s.v < 0 && *s.v != NoSizeLimit {
			return nil, fmt.Errorf("%w: NodeOptions.%s is %d; use a size in bytes > 0, 0 for the default %d, or NoSizeLimit", core.ErrInvalidConfig, s.name, *s.v, s.def)
		}
	}
	if o.MaxMessageBytes > 0 && o.MaxBatchBytes > 0 && o.MaxBatchBytes < o.MaxMessageBytes {
		return nil, fmt.Errorf("%w: NodeOptions.MaxBatchBytes %d is below NodeOptions.MaxMessageBytes %d; a batch must hold one message of the largest size", core.ErrInvalidConfig, o.MaxBatchBytes, o.MaxMessageBytes)
	}
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.Lease < 100*time.Millisecond {
		return nil, fmt.Errorf("%w: NodeOptions.Lease is %v; use at least 100ms (default 30s)", core.ErrInvalidConfig, o.Lease)
	}
	n := &Engine{
		id: o.ID, opts: o, backend: backend, specs: o.Specs, clock: o.Clock, hooks: o.Hooks,
		log:         o.Logger.With("txmq_node", o.ID),
		closeDone:   make(chan struct{}),
		orderErr:    core.OrdersKeys(backend),
		prioErr:     core.Prioritizes(backend),
		fairErr:     core.SharesFairly(backend),
		fairPrioErr: core.SharesFairlyByPriority(backend),
		limitErr:    core.LimitsClaims(backend),
	}
	if d, err := core.DedupsIDs(backend); err == nil {
		n.onePerBatch = d.OnePerBatch
	}
	n.pub.init(n)
	n.drv.init(n)
	n.run.init(n)
	n.plug(o.Features)
	for _, name := range o.Specs.Names() {
		if err := n.checkOrdered(o.Specs.Lookup(name)); err != nil {
			return nil, err
		}
	}
	n.closeDoneFn = sync.OnceFunc(func() { close(n.closeDone) })
	n.stopCtx, n.stop = context.WithCancel(context.Background())
	return n, nil
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// ID returns the node's id.
func (n *Engine) ID() string { return n.id }

// Backend returns the node's backend.
func (n *Engine) Backend() core.Backend { return n.backend }

// Clock returns the engine's clock.
func (n *Engine) Clock() Clock { return n.clock }

// PollWait returns the engine's PollWait, defaults applied.
func (n *Engine) PollWait() time.Duration { return n.opts.PollWait }

// DriverTurn returns when the driver last began an iteration (zero before Start), and
// whether the engine stopped fetching.
func (n *Engine) DriverTurn() (last time.Time, stopped bool) {
	if t := n.drv.lastTurn(); t != 0 {
		last = time.Unix(0, t)
	}
	return last, n.stopCtx.Err() != nil
}

// Logger returns the node's logger.
func (n *Engine) Logger() *slog.Logger { return n.log }

// Halted reports whether the node was halted (Halt: a simulated crash). A feature's loop ending
// on a halted node leaves no trace a crashed process could not leave (no last write).
func (n *Engine) Halted() bool { return n.halted.Load() }

// Listen registers l, the one listener of its queue on this engine.
func (n *Engine) Listen(l *Listener) error {
	if n.specs.Lookup(l.Spec.Name) != l.Spec {
		return fmt.Errorf("%w: queue %q is not declared in this node's registry: declare it with Declare on the registry passed in NodeOptions.Registry", core.ErrNotDeclared, l.Spec.Name)
	}
	if err := n.checkOrdered(l.Spec); err != nil {
		return err
	}
	return n.drv.addListener(l)
}

// checkOrdered refuses an Ordered queue when the node's backend does not enforce per-key
// order, and a queue a SpecChecker refuses. NewNode checks the queues already declared in
// its registry, Listen and publish the ones declared later.
func (n *Engine) checkOrdered(spec *Spec) error {
	for _, c := range n.checkers {
		if err := c.CheckSpec(spec); err != nil {
			return err
		}
	}
	if err := n.checkPrioritized(spec); err != nil {
		return err
	}
	if err := n.checkFair(spec); err != nil {
		return err
	}
	if err := n.checkLimits(spec); err != nil {
		return err
	}
	if spec == nil || !spec.Ordered || n.orderErr == nil {
		return nil
	}
	return fmt.Errorf("txmq: queue %q is Ordered but this node's backend cannot keep per-key order; use an adapter that can (see \"Ordering\" in docs/guide.md) or declare the queue without Ordered: %w", spec.Name, n.orderErr)
}

// Start begins fetching and running batches for the queues this node listens to. Listeners may
// also be added after Start. Start returns at once; ctx is not retained (use Close to stop).
func (n *Engine) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("txmq: node %s: Start with a context that is already done: %w", n.id, err)
	}
	for _, p := range n.preparers {
		p.Prepare(n.stopCtx) // before the first fetch: a paused queue is not fetched at start
	}
	if err := n.drv.start(); err != nil {
		return err
	}
	n.loops.Add(2)
	go n.drv.driveLoop()
	go n.run.leaseLoop()
	for _, l := range n.loopers {
		n.loops.Add(1)
		go func() {
			defer n.loops.Done()
			l.Loop(n.stopCtx)
		}()
	}
	return nil
}

// Stats returns the node's counters.
func (n *Engine) Stats() Stats {
	s := Stats{
		PublishedBatches:  n.stats.publishedBatches.Load(),
		PublishedMessages: n.stats.publishedMessages.Load(),
		Runs:              n.stats.runs.Load(),
		Succeeded:         n.stats.succeeded.Load(),
		Failed:            n.stats.failed.Load(),
		Retried:           n.stats.retried.Load(),
		EarlyArrivals:     n.stats.early.Load(),
		HandedOff:         n.stats.handedOff.Load(),
		LeaseLost:         n.stats.leaseLost.Load(),
		TimedOut:          n.stats.timedOut.Load(),
		Stuck:             n.stats.stuck.Load(),
		Deduplicated:      n.stats.deduplicated.Load(),
		Snoozed:           n.stats.snoozed.Load(),
		Dropped:           map[string]int64{},
		Buffered:          int64(n.pub.buffered()),
	}
	n.stats.mu.Lock()
	for k, v := range n.stats.dropped {
		s.Dropped[k] = v
	}
	n.stats.mu.Unlock()
	s.InFlight = int64(n.drv.busy())
	return s
}

// Depths reports the backend's depths for every queue declared in the node's registry.
func (n *Engine) Depths(ctx context.Context) (map[string]core.Depth, error) {
	return n.backend.Depths(ctx, n.specs.Names())
}

// claimCtx returns a context for one backend call that is detached from shutdown.
func (n *Engine) claimCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), n.opts.ClaimTimeout)
}

// signal wakes the fetch loop without blocking.
func (dr *driver) signal() {
	select {
	case dr.wake <- struct{}{}:
	default:
	}
}

func (dr *driver) cancelFetch() {
	dr.mu.Lock()
	c := dr.fetchCancel
	dr.mu.Unlock()
	if c != nil {
		c()
	}
}

// safeCall runs one call into adapter or app code (a backend method, the outbox handoff),
// turning a panic into an error so that it takes the same path as a failure.
func safeCall(what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("txmq: %s panicked: %v", what, r)
		}
	}()
	return fn()
}

// safeHook runs a metrics hook, recovering its panics.
func (n *Engine) safeHook(name string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("txmq: hook panicked", "hook", name, "panic", r)
		}
	}()
	fn()
}

// isUnavailable reports whether err means the backend is unavailable.
func isUnavailable(err error) bool { return errors.Is(err, core.ErrBackendUnavailable) }
