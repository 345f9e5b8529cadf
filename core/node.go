package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// NodeOptions configures a node. Only Backend is required; every other zero field means the
// documented default.
type NodeOptions struct {
	// Backend stores and delivers batches. Required. The node does not close it.
	Backend Backend
	// Registry holds the queue declarations this node publishes and listens to.
	// Default: DefaultRegistry.
	Registry *Registry
	// Handoff takes buffered flushes that the backend refused (the outbox). Default none: such
	// a batch is dropped, logged and counted with reason "no_outbox".
	Handoff Handoff
	// DeadLetters stores dropped batches. Default none: drops are logged and counted only.
	DeadLetters DeadLetterSink
	// Logger receives the node's logs. Default slog.Default().
	Logger *slog.Logger
	// Hooks receives events for metrics. Default none.
	Hooks *Hooks
	// Clock tells time to the publish buffer. Default the system clock.
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
	// FetchMax caps the claims asked for in one Fetch when every queue is uncapped. Default 100.
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
	// Default 15 s.
	CloseFlushTimeout time.Duration
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
	backend Backend
	reg     *Registry
	log     *slog.Logger
	hooks   Hooks
	clock   Clock
	stats   counters

	mu          sync.Mutex
	listeners   map[string]*listener
	inflight    map[string]int
	steppedBack map[string]time.Time // queue -> until when it is left out of fetches (stepBack)
	running     map[*running]struct{}
	fetching    map[string]bool    // queues of the last fetch request
	fetchCancel context.CancelFunc // interrupts the Fetch in progress, if any
	stale       bool               // the request being prepared misses a freed slot or a new listener
	started     bool
	closed      bool // no more Start, Listen, fetch or new workers (set by Close and Halt)

	wake chan struct{}
	buf  *buffer

	runCtx      context.Context // parent of listener contexts
	runCancel   context.CancelFunc
	stopCtx     context.Context // done when the node stops fetching
	stop        context.CancelFunc
	flushStop   chan struct{} // closed when the buffer is sealed: the flusher ends
	stopFlusher func()
	closeDone   chan struct{} // closed when the first Close (or Halt) has finished
	closeDoneFn func()
	halted      atomic.Bool
	frozen      atomic.Bool
	closing     atomic.Bool
	loops       sync.WaitGroup
	workers     sync.WaitGroup
	pool        workerPool     // goroutines that run batches (see workerPool)
	extending   sync.WaitGroup // lease extensions in flight
	extendsDone bool           // the lease loop ended: no more extensions (under mu)
	extendSem   chan struct{}  // bounds them
	margin      time.Duration  // LeaseMargin(opts.Lease)
	terminals   terminalMemory // batch ids this node dead-lettered
}

// NewNode returns a node on opts.Backend. Publishing works at once; call Listen for each queue
// this node serves, then Start to begin fetching.
func NewNode(opts *NodeOptions) (*Node, error) {
	if opts == nil || opts.Backend == nil {
		return nil, fmt.Errorf("%w: NodeOptions.Backend is required (for example memory.New(nil), or core.OpenBackend with TXMQ_BACKEND)", ErrInvalidConfig)
	}
	o := *opts
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
		o.ID = NewID()
	}
	setDefault(&o.Lease, 30*time.Second)
	if h, ok := o.Backend.(PollWaitHinter); ok && o.PollWait <= 0 {
		o.PollWait = h.PollWaitHint()
	}
	setDefault(&o.PollWait, time.Second)
	setDefault(&o.FlushWindow, 20*time.Millisecond)
	setDefault(&o.FlushCap, 100*time.Millisecond)
	setDefault(&o.FlushTick, 10*time.Millisecond)
	setDefault(&o.ClaimTimeout, 10*time.Second)
	setDefault(&o.CloseFlushTimeout, 15*time.Second)
	if o.FetchMax <= 0 {
		o.FetchMax = 100
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
			return nil, fmt.Errorf("%w: NodeOptions.%s is %d; use a size in bytes > 0, 0 for the default %d, or core.NoSizeLimit", ErrInvalidConfig, s.name, *s.v, s.def)
		}
	}
	if opts.MaxMessageBytes > 0 && opts.MaxBatchBytes > 0 && opts.MaxBatchBytes < opts.MaxMessageBytes {
		return nil, fmt.Errorf("%w: NodeOptions.MaxBatchBytes %d is below NodeOptions.MaxMessageBytes %d; a batch must hold one message of the largest size", ErrInvalidConfig, opts.MaxBatchBytes, opts.MaxMessageBytes)
	}
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.Lease < 100*time.Millisecond {
		return nil, fmt.Errorf("%w: NodeOptions.Lease is %v; use at least 100ms (default 30s)", ErrInvalidConfig, o.Lease)
	}
	n := &Node{
		id: o.ID, opts: o, backend: o.Backend, reg: o.Registry, clock: o.Clock,
		log:         o.Logger.With("txmq_node", o.ID),
		listeners:   make(map[string]*listener),
		inflight:    make(map[string]int),
		steppedBack: make(map[string]time.Time),
		running:     make(map[*running]struct{}),
		wake:        make(chan struct{}, 1),
		flushStop:   make(chan struct{}),
		closeDone:   make(chan struct{}),
		extendSem:   make(chan struct{}, extendConcurrency),
		margin:      LeaseMargin(o.Lease),
	}
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
func (n *Node) Backend() Backend { return n.backend }

// Registry returns the node's registry.
func (n *Node) Registry() *Registry { return n.reg }

// Logger returns the node's logger.
func (n *Node) Logger() *slog.Logger { return n.log }

func (n *Node) addListener(l *listener) error {
	if n.reg.lookup(l.spec.name) != l.spec {
		return fmt.Errorf("%w: queue %q is not declared in this node's registry: declare it with core.Declare on the registry passed in NodeOptions.Registry", ErrNotDeclared, l.spec.name)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("%w: queue %q: cannot listen on a closed node", ErrClosed, l.spec.name)
	}
	if _, dup := n.listeners[l.spec.name]; dup {
		return fmt.Errorf("%w: queue %q already has a listener on this node: one listener per queue per node; put the branching inside it", ErrInvalidConfig, l.spec.name)
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

// Start begins fetching and running batches for the queues this node listens to. Listeners may
// also be added after Start. Start returns at once; ctx is not retained (use Close to stop).
func (n *Node) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("txmq: node %s: Start with a context that is already done: %w", n.id, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("%w: node %s: Start after Close or Halt; a closed node cannot restart, create a new node", ErrClosed, n.id)
	}
	if n.started {
		return fmt.Errorf("%w: node %s is already started: call Start once per node", ErrInvalidConfig, n.id)
	}
	n.started = true
	n.loops.Add(2)
	go n.driveLoop()
	go n.leaseLoop()
	return nil
}

// Close stops fetching, flushes the publish buffer (publishing what it holds, or handing it to
// the outbox) on a context of its own, each write bounded by NodeOptions.CloseFlushTimeout,
// whatever ctx is (the usual `<-ctx.Done(); node.Close(ctx)` loses nothing), and waits for running
// listeners until ctx is done: ctx bounds only that wait. Then it cancels their
// contexts, waits for them to return and releases their batches for another run that does not
// count against the budget. A listener that ignores its context therefore delays Close.
// Listeners may still publish while Close waits for them; what they publish is flushed before
// Close returns. Batches claimed after the stop began are given back unrun. Publishing after
// Close returns ErrClosed; an after-commit publish that races Close is published directly.
// A second Close waits for the first (or for its own ctx). Close does not close the backend.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		select {
		case <-n.closeDone:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("txmq: node %s: still closing when this Close gave up: %w", n.id, ctx.Err())
		}
	}
	n.closed = true
	n.closing.Store(true)
	n.mu.Unlock()
	defer n.closeDoneFn()
	n.stop()
	n.cancelFetch()
	// The buffer drains on its own bounded context: ctx bounds only the wait for listeners.
	n.closeFlush()
	done := make(chan struct{})
	go func() { n.workers.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		// A ctx already done is no error when no listener runs (workers may still be
		// settling, each bounded by ClaimTimeout).
		if n.listenersRunning() {
			err = fmt.Errorf("txmq: node %s: listeners still running at close, released for another run: %w", n.id, ctx.Err())
			n.runCancel()
		}
		<-done
	}
	n.runCancel()
	// No listener runs any more: from here publishing fails, and an after-commit publish
	// goes straight to the backend.
	n.buf.seal()
	n.stopFlusher()
	n.loops.Wait()
	n.closeFlush() // what listeners published while Close waited for them
	return err
}

// closeFlush drains the publish buffer for Close on a context of its own, detached from
// Close's ctx. Every batch is written while the backend accepts them, each write bounded by
// CloseFlushTimeout, so a healthy backend loses nothing however large the buffer; once one
// write fails, the batches not yet written go straight to the outbox (or are dropped and
// counted without one), so a backend that is down delays Close by about one CloseFlushTimeout
// plus the outbox inserts.
func (n *Node) closeFlush() {
	n.flushAll(context.WithValue(context.Background(), closingKey{}, &closeFailed{}))
}

// Halt stops the node at once as if its process died: no settle, no lease extension, no drain;
// buffered messages are lost and claimed batches come back after their leases expire. It is
// for crash tests (coretest, parity) and never needed in an app.
func (n *Node) Halt() {
	n.halted.Store(true)
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.stop()
	n.cancelFetch()
	n.runCancel()
	n.buf.discard()
	n.stopFlusher()
	n.loops.Wait()
	n.closeDoneFn()
}

// listenersRunning reports whether a batch of this node holds a slot (its listener or its
// terminal path runs).
func (n *Node) listenersRunning() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, v := range n.inflight {
		if v > 0 {
			return true
		}
	}
	return false
}

// Freeze simulates a paused process (a long GC pause, SIGSTOP, an overloaded VM) for fault
// tests (parity): the node stops fetching and extending leases until Thaw, while its running
// listeners go on. Its fence timers still run, so a claim not confirmed extended before
// LeaseUntil - LeaseMargin is cancelled with ErrLeaseLost and never settled. It is never
// needed in an app.
func (n *Node) Freeze() {
	n.frozen.Store(true)
	n.cancelFetch()
}

// Thaw ends a Freeze: the node fetches and extends leases again.
func (n *Node) Thaw() {
	n.frozen.Store(false)
	n.signal()
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
func (n *Node) Depths(ctx context.Context) (map[string]Depth, error) {
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
func isUnavailable(err error) bool { return errors.Is(err, ErrBackendUnavailable) }
