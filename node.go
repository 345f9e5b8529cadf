package txmq

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

// NodeOptions configures a node (the backend is NewNode's argument). Every zero field means the
// documented default.
type NodeOptions struct {
	// Registry holds the queue declarations this node publishes and listens to.
	// Default: DefaultRegistry.
	Registry *Registry
	// Handoff takes buffered flushes that the backend refused (the outbox). Default none: such
	// a batch is dropped, logged and counted with reason "no_outbox".
	Handoff core.Handoff
	// DeadLetters stores dropped batches. Default none: drops are logged and counted only.
	DeadLetters core.DeadLetterSink
	// Ledger records the life of every message this node publishes and runs (package
	// ledger), and tells the node which messages are cancelled: they are left out of their
	// batch before the listener sees it, and a batch left empty is acked. If it also
	// implements core.MessageStore, the node's Inspector reads it. Open sets it when
	// Config.Ledger is set. Default none: no ledger, and the Inspector falls back on the
	// backend's native lookup where it has one.
	Ledger core.MessageRecorder
	// Logger receives the node's logs. Default slog.Default().
	Logger *slog.Logger
	// Hooks receives events for metrics. Default none.
	Hooks *Hooks
	// Clock tells time to the publish buffer and to the schedules (which tick is due; see
	// Queue.Schedule). Default the system clock.
	Clock Clock
	// ID names the node as lease owner. Default a new random id.
	ID string
	// Lease is how long a claim stays valid without extension; the node extends it while the
	// listener runs, and fences a claim not confirmed extended by LeaseUntil -
	// LeaseMargin(Lease) (see the package doc). Default 30 s, at least 100 ms.
	Lease time.Duration
	// PollWait is how long one Fetch may wait for work. Default: the backend's PollWaitHint if
	// it has one (SQS: 20 s), else 1 s. A new listener or a freed slot interrupts the wait.
	PollWait time.Duration
	// FetchMax caps the claims asked for in one Fetch, across all its queues; it is also what
	// a queue without a concurrency cap asks for. Default 100 (core.DefaultFetchMax).
	FetchMax int
	// Backoff gives the retry delay after a failed run (1-based). Default DefaultBackoff.
	Backoff func(run int) time.Duration
	// FlushWindow is the publish buffer's sliding window: a queue's buffer is flushed once no
	// message was added to it for this long. Default 20 ms.
	FlushWindow time.Duration
	// FlushCap bounds the wait from the first message in a queue's buffer: the buffer is flushed
	// at most this long after it, however steadily messages keep coming. Default 100 ms, so a
	// plain publish reaches the backend within about 100 ms at any rate.
	FlushCap time.Duration
	// FlushTick is how often the flusher checks the buffer. Default 10 ms.
	FlushTick time.Duration
	// ClaimTimeout bounds each claim, settle and lease call; these run detached from shutdown
	// so stopping never strands claimed work. Default 10 s.
	ClaimTimeout time.Duration
	// CloseFlushTimeout bounds each write of Close's final flush of the publish buffer, which
	// runs on a context of its own whatever the ctx given to Close (even one already done).
	// Every buffered batch is written while the backend accepts them; once a write fails or
	// times out, the batches not yet written are handed to the outbox (Handoff) at once.
	// Writes of the background flusher still waiting on the backend when Close begins get
	// no more than this either. Default 15 s.
	CloseFlushTimeout time.Duration
	// Tracer, if set, starts spans around publish calls and listener runs and carries the trace
	// context through batches (package otel's Tracer). Default none. It supersedes InjectTrace
	// and ExtractTrace.
	Tracer Tracer
	// Pauses tells the node which queues are paused cluster-wide (see PauseSource); the node
	// starts no batch of a paused queue, and running ones finish. Open sets it to the outbox
	// store's Pauses when the app has a database. Default none: no queue is ever paused.
	Pauses PauseSource
	// Limiter hands out the start tokens of rate-limited queues (QueueConfig.RateLimit); Open
	// sets it to the outbox store's Limits when the app has a database, so the limits hold
	// cluster-wide.
	// Default: a limiter of this node alone (each node then allows the whole rate).
	Limiter Limiter
	// Ticks makes each tick of the registry's schedules publish once cluster-wide (see
	// Queue.Schedule); Open sets it to the outbox store's Ticks when the app has a database.
	// Default none: the node does not run schedules.
	Ticks TickClaimer
	// PauseCheck is how often the node reads Pauses: a pause or resume takes effect on every
	// node within PauseCheck plus one fetch. Default 1 s.
	PauseCheck time.Duration
	// InjectTrace, if set, returns the trace context to store in published batches.
	InjectTrace func(ctx context.Context) map[string]string
	// ExtractTrace, if set, returns the listener's context carrying a batch's trace context.
	ExtractTrace func(ctx context.Context, trace map[string]string) context.Context
	// MaxMessageBytes is the largest encoded (JSON) message a publish accepts, unless the
	// queue's QueueConfig.MaxMessageBytes says otherwise; a larger one fails the publish call
	// with an error wrapping ErrRejected, and nothing of the call is published. Default
	// DefaultMaxMessageBytes (1 MiB); NoSizeLimit: no library limit. The backend's own limit
	// (SizeLimiter) always applies. See the package doc's size limits.
	MaxMessageBytes int
	// MaxBatchBytes is the soft size limit of an encoded batch: publishes are cut into batches
	// that stay under it (a batch always holds at least one message). Default
	// DefaultMaxBatchBytes (8 MiB), and never below MaxMessageBytes; NoSizeLimit: no library
	// limit. The backend's own limit always applies.
	MaxBatchBytes int
}

// Node is one running core: it publishes through a coalescing buffer and, once started, fetches
// and runs batches for the queues it listens to. Many nodes may share one backend.
type Node struct {
	id      string
	opts    NodeOptions
	backend core.Backend
	reg     *Registry
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
	listeners   map[string]*listener
	inflight    map[string]int
	steppedBack map[string]time.Time // queue -> until when it is left out of fetches (stepBack)
	fetching    map[string]bool      // queues of the last fetch request
	reqSpecs    []*queueSpec         // fetchRequest's buffers (the driver's own, outside mu)
	reqLimits   []int
	pauseTimer  *time.Timer        // the driver's (pause)
	fetchCancel context.CancelFunc // interrupts the Fetch in progress, if any
	stale       bool               // the request being prepared misses a freed slot or a new listener
	started     bool
	paused      atomic.Pointer[map[string]bool] // queues paused cluster-wide, as last read from opts.Pauses; read without n.mu
	limiter     Limiter                         // opts.Limiter or a local one
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

// NewNode returns a node on backend, with opts (nil means every default). Publishing works at
// once; call Listen for each queue this node serves, then Start to begin fetching. Most apps
// get their node from Open, which opens the backend named by TXMQ_BACKEND.
func NewNode(backend core.Backend, opts *NodeOptions) (*Node, error) {
	if backend == nil {
		return nil, fmt.Errorf("%w: NewNode needs a backend (for example memory.New(nil), or txmq.OpenBackend(ctx, url))", core.ErrInvalidConfig)
	}
	var o NodeOptions
	if opts != nil {
		o = *opts
	}
	if o.Registry == nil {
		o.Registry = DefaultRegistry
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
		o.Backoff = DefaultBackoff
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
	n := &Node{
		id: o.ID, opts: o, backend: backend, reg: o.Registry, clock: o.Clock,
		log:         o.Logger.With("txmq_node", o.ID),
		listeners:   make(map[string]*listener),
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
	for _, name := range o.Registry.Names() {
		if err := n.checkOrdered(o.Registry.lookup(name)); err != nil {
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
	if o.Hooks != nil {
		n.hooks = *o.Hooks
	}
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
func (n *Node) ID() string { return n.id }

// Backend returns the node's backend.
func (n *Node) Backend() core.Backend { return n.backend }

// Registry returns the node's registry.
func (n *Node) Registry() *Registry { return n.reg }

// Logger returns the node's logger.
func (n *Node) Logger() *slog.Logger { return n.log }

func (n *Node) addListener(l *listener) error {
	if n.reg.lookup(l.spec.name) != l.spec {
		return fmt.Errorf("%w: queue %q is not declared in this node's registry: declare it with Declare on the registry passed in NodeOptions.Registry", core.ErrNotDeclared, l.spec.name)
	}
	if err := n.checkOrdered(l.spec); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("%w: queue %q: cannot listen on a closed node", core.ErrClosed, l.spec.name)
	}
	if _, dup := n.listeners[l.spec.name]; dup {
		return fmt.Errorf("%w: queue %q already has a listener on this node: one listener per queue per node; put the branching inside it", core.ErrInvalidConfig, l.spec.name)
	}
	n.listeners[l.spec.name] = l
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
func (n *Node) checkOrdered(spec *queueSpec) error {
	if err := n.checkDedup(spec); err != nil {
		return err
	}
	if spec == nil || !spec.ordered || n.orderErr == nil {
		return nil
	}
	return fmt.Errorf("txmq: queue %q is Ordered but this node's backend cannot keep per-key order; use an adapter that can (see \"Ordering\" in docs/guide.md) or declare the queue without Ordered: %w", spec.name, n.orderErr)
}

// Start begins fetching and running batches for the queues this node listens to. Listeners may
// also be added after Start. Start returns at once; ctx is not retained (use Close to stop).
func (n *Node) Start(ctx context.Context) error {
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
	case len(n.reg.scheduleList()) > 0:
		n.log.Warn("txmq: schedules are declared but this node has no NodeOptions.Ticks (an app database, TXMQ_DATABASE_URL): it does not run them")
	}
	n.startRepublisher()
	return nil
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
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
func (n *Node) Depths(ctx context.Context) (map[string]core.Depth, error) {
	return n.backend.Depths(ctx, n.reg.Names())
}

// claimCtx returns a context for one backend call that is detached from shutdown.
func (n *Node) claimCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), n.opts.ClaimTimeout)
}

// signal wakes the fetch loop without blocking.
func (n *Node) signal() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *Node) cancelFetch() {
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
func (n *Node) safeHook(name string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("txmq: hook panicked", "hook", name, "panic", r)
		}
	}()
	fn()
}

// isUnavailable reports whether err means the backend is unavailable.
func isUnavailable(err error) bool { return errors.Is(err, core.ErrBackendUnavailable) }
