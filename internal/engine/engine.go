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
	// Schedules returns the declared schedules, each bound to its publish; nil: none.
	Schedules func() []Schedule
	// Handoff takes buffered flushes the backend refused (the outbox); nil: dropped.
	Handoff core.Handoff
	// DeadLetters stores dropped batches; nil: logged and counted only.
	DeadLetters core.DeadLetterSink
	// Ledger records the life of every message (package ledger); nil: none.
	Ledger core.MessageRecorder
	// Logger receives the logs. Default slog.Default().
	Logger *slog.Logger
	// Hooks receives events for metrics.
	Hooks Hooks
	// Clock tells time to the buffer and the schedules. Default the system clock.
	Clock Clock
	// ID names the node as lease owner. Default a new random id.
	ID string
	// Lease, PollWait, FetchMax, Backoff, FlushWindow, FlushCap, FlushTick, ClaimTimeout,
	// CloseFlushTimeout and PauseCheck are txmq.NodeOptions' settings of the same names.
	Lease, PollWait                  time.Duration
	FetchMax                         int
	Backoff                          func(run int) time.Duration
	FlushWindow, FlushCap, FlushTick time.Duration
	ClaimTimeout, CloseFlushTimeout  time.Duration
	PauseCheck                       time.Duration
	// Tracer starts spans around publish calls and runs; nil: none.
	Tracer Tracer
	// Pauses tells which queues are paused cluster-wide; nil: none ever is.
	Pauses PauseSource
	// Limiter hands out rate-limit tokens. Default: the backend's, else one of this node.
	Limiter core.Limiter
	// Ticks claims schedule ticks cluster-wide; nil: schedules do not run here.
	Ticks TickClaimer
	// InjectTrace and ExtractTrace carry trace contexts without a Tracer.
	InjectTrace  func(ctx context.Context) map[string]string
	ExtractTrace func(ctx context.Context, trace map[string]string) context.Context
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
	// handed remembers the ordering keys this node handed to the outbox (see followsOutbox).
	handed handedKeys
	// dedup is how the backend deduplicates caller ids (core.DedupsIDs), and dedupErr why it
	// cannot (nil when it can): a queue with an IDDedupWindow is refused on this node with it.
	dedup    core.DedupSupport
	dedupErr error

	mu          sync.Mutex
	listeners   map[string]*Listener
	inflight    map[string]int
	steppedBack map[string]time.Time // queue -> until when it is left out of fetches (stepBack)
	fetching    map[string]bool      // queues of the last fetch request
	reqSpecs    []*Spec              // fetchRequest's buffers (the driver's own, outside mu)
	reqLimits   []int
	pauseTimer  *time.Timer        // the driver's (pause)
	fetchCancel context.CancelFunc // interrupts the Fetch in progress, if any
	stale       bool               // the request being prepared misses a freed slot or a new listener
	started     bool
	paused      atomic.Pointer[map[string]bool] // queues paused cluster-wide, as last read from opts.Pauses; read without n.mu
	limiter     core.Limiter                    // opts.Limiter or a local one
	tokens      map[string]int                  // rate-limit tokens the pending fetch holds (driver only)
	tokenWait   time.Duration                   // until the next token of a rate-limited queue that got none (driver only)
	driverTurn  atomic.Int64                    // Start, then each driver loop iteration's start (UnixNano); 0 before Start
	closed      bool                            // no more Start, Listen, fetch or new workers (set by Close and Halt)

	wake chan struct{}
	buf  *buffer

	runCtx          context.Context // done when listeners are cancelled (cancelRunning)
	runCancel       context.CancelFunc
	stopCtx         context.Context // done when the node stops fetching
	stop            context.CancelFunc
	flushStop       chan struct{} // closed when the buffer is sealed: the flusher ends
	stopFlusher     func()
	closeDone       chan struct{} // closed when the first Close (or Halt) has finished
	closeDoneFn     func()
	halted          atomic.Bool
	frozen          atomic.Bool
	closing         atomic.Bool
	writes          inflightWrites              // buffer writes in progress, whose deadlines Close shortens
	closeFlushState atomic.Pointer[closeFailed] // set when Close begins: every write since is bounded like the final flush's
	loops           sync.WaitGroup
	workers         sync.WaitGroup
	pool            workerPool     // goroutines that run batches (see workerPool)
	extending       sync.WaitGroup // lease extensions in flight
	extendsDone     bool           // the lease loop ended: no more extensions (under mu)
	extendSem       chan struct{}  // bounds them
	margin          time.Duration  // LeaseMargin(opts.Lease)
	fences          fenceSet       // running claims by fence time, with the node's fence timer
	terminals       terminalMemory // batch ids this node dead-lettered
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
	if o.Schedules == nil {
		o.Schedules = func() []Schedule { return nil }
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
	setDefault(&o.PauseCheck, time.Second)
	setDefault(&o.FlushWindow, 20*time.Millisecond)
	setDefault(&o.FlushCap, 100*time.Millisecond)
	setDefault(&o.FlushTick, 10*time.Millisecond)
	setDefault(&o.ClaimTimeout, 10*time.Second)
	setDefault(&o.CloseFlushTimeout, 15*time.Second)
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
		listeners:   make(map[string]*Listener),
		inflight:    make(map[string]int),
		steppedBack: make(map[string]time.Time),
		wake:        make(chan struct{}, 1),
		flushStop:   make(chan struct{}),
		closeDone:   make(chan struct{}),
		extendSem:   make(chan struct{}, extendConcurrency),
		margin:      core.LeaseMargin(o.Lease),
		limiter:     o.Limiter,
		orderErr:    core.OrdersKeys(backend),
	}
	n.dedup, n.dedupErr = core.DedupsIDs(backend)
	for _, name := range o.Specs.Names() {
		if err := n.checkOrdered(o.Specs.Lookup(name)); err != nil {
			return nil, err
		}
	}
	if n.limiter == nil {
		if l, ok := backend.(core.Limiter); ok {
			n.limiter = l
		} else {
			n.limiter = &localLimiter{}
		}
	}
	n.fences.fire = n.fenceExpired
	n.buf = newBuffer(o.FlushWindow, o.FlushCap, func() {
		n.loops.Add(1)
		go n.flushLoop()
	})
	n.stopFlusher = sync.OnceFunc(func() { close(n.flushStop) })
	n.closeDoneFn = sync.OnceFunc(func() { close(n.closeDone) })
	n.runCtx, n.runCancel = context.WithCancel(context.Background())
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
	if t := n.driverTurn.Load(); t != 0 {
		last = time.Unix(0, t)
	}
	return last, n.stopCtx.Err() != nil
}

// Logger returns the node's logger.
func (n *Engine) Logger() *slog.Logger { return n.log }

// Listen registers l, the one listener of its queue on this engine.
func (n *Engine) Listen(l *Listener) error {
	if n.specs.Lookup(l.Spec.Name) != l.Spec {
		return fmt.Errorf("%w: queue %q is not declared in this node's registry: declare it with Declare on the registry passed in NodeOptions.Registry", core.ErrNotDeclared, l.Spec.Name)
	}
	if err := n.checkOrdered(l.Spec); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("%w: queue %q: cannot listen on a closed node", core.ErrClosed, l.Spec.Name)
	}
	if _, dup := n.listeners[l.Spec.Name]; dup {
		return fmt.Errorf("%w: queue %q already has a listener on this node: one listener per queue per node; put the branching inside it", core.ErrInvalidConfig, l.Spec.Name)
	}
	n.listeners[l.Spec.Name] = l
	n.signal()
	if c := n.fetchCancel; c != nil {
		c() // the fetch in progress does not ask for the new queue
	} else {
		n.stale = true // nor does the one about to start
	}
	return nil
}

// checkOrdered refuses an Ordered queue when the node's backend does not enforce per-key
// order, and a queue with an IDDedupWindow it cannot honour (checkDedup). NewNode checks the queues already declared in its registry, Listen and publish the
// ones declared later.
func (n *Engine) checkOrdered(spec *Spec) error {
	if err := n.checkDedup(spec); err != nil {
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
	if n.opts.Pauses != nil {
		n.readPaused() // before the first fetch: a paused queue is not fetched at start
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("%w: node %s: Start after Close or Halt; a closed node cannot restart, create a new node", core.ErrClosed, n.id)
	}
	if n.started {
		return fmt.Errorf("%w: node %s is already started: call Start once per node", core.ErrInvalidConfig, n.id)
	}
	n.started = true
	n.driverTurn.Store(time.Now().UnixNano()) // the driver is due to turn from now on (Live)
	n.loops.Add(2)
	go n.driveLoop()
	go n.leaseLoop()
	if n.opts.Pauses != nil {
		n.loops.Add(1)
		go n.pauseLoop()
	}
	switch {
	case n.opts.Ticks != nil:
		n.loops.Add(1)
		go n.scheduleLoop()
	case len(n.opts.Schedules()) > 0:
		n.log.Warn("txmq: schedules are declared but this node has no NodeOptions.Ticks (an app database, TXMQ_DATABASE_URL): it does not run them")
	}
	n.startRepublisher()
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
		Deduplicated:      n.stats.deduplicated.Load(),
		Dropped:           map[string]int64{},
		Buffered:          int64(n.buf.size()),
	}
	n.stats.mu.Lock()
	for k, v := range n.stats.dropped {
		s.Dropped[k] = v
	}
	n.stats.mu.Unlock()
	n.mu.Lock()
	for _, v := range n.inflight {
		s.InFlight += int64(v)
	}
	n.mu.Unlock()
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
func (n *Engine) signal() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *Engine) cancelFetch() {
	n.mu.Lock()
	c := n.fetchCancel
	n.mu.Unlock()
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
