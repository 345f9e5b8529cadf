package txmq

import (
	"context"
	"log/slog"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/feature"
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
	// Heartbeats, if set, receives the node's heartbeat from Start to Close: its id, the
	// queues it listens to with their slots in use and caps, the txmq version and when it
	// started, every 5 s, and a last row marked stopped as it closes (the dashboard's nodes
	// page). Open sets it to the outbox store's Nodes when the app has a database. Default
	// none.
	Heartbeats core.HeartbeatStore
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
	// RunMiddleware wraps every run of every listener of this node, outside the queue's own
	// (QueueConfig.RunMiddleware), the first of the slice outermost (see RunMiddleware).
	// Default none.
	RunMiddleware []RunMiddleware
	// PublishMiddleware wraps every publish call made on this node, outside the queue's own
	// (QueueConfig.PublishMiddleware), the first of the slice outermost (see
	// PublishMiddleware). Default none.
	PublishMiddleware []PublishMiddleware
}

// Node is one running core: it publishes through a coalescing buffer and, once started, fetches
// and runs batches for the queues it listens to. Many nodes may share one backend.
type Node struct {
	eng  *engine.Engine
	reg  *Registry
	opts NodeOptions // as given, Registry set
}

// NewNode returns a node on backend, with opts (nil means every default). Publishing works at
// once; call Listen for each queue this node serves, then Start to begin fetching. Most apps
// get their node from Open, which opens the backend named by TXMQ_BACKEND.
func NewNode(backend core.Backend, opts *NodeOptions) (*Node, error) {
	var o NodeOptions
	if opts != nil {
		o = *opts
	}
	if o.Registry == nil {
		o.Registry = DefaultRegistry
	}
	n := &Node{reg: o.Registry, opts: o}
	eo := engine.Options{
		Specs:   registrySpecs{o.Registry},
		Handoff: o.Handoff, DeadLetters: o.DeadLetters, Logger: o.Logger,
		ID: o.ID, Lease: o.Lease, PollWait: o.PollWait, FetchMax: o.FetchMax, Backoff: o.Backoff,
		FlushWindow: o.FlushWindow, FlushCap: o.FlushCap, FlushTick: o.FlushTick,
		ClaimTimeout: o.ClaimTimeout, CloseFlushTimeout: o.CloseFlushTimeout,
		MaxMessageBytes: o.MaxMessageBytes, MaxBatchBytes: o.MaxBatchBytes,
	}
	// Interfaces are set only when given: a nil one inside a non-nil interface is not nil.
	if o.Hooks != nil {
		eo.Hooks = engine.Hooks(*o.Hooks)
	}
	if o.Clock != nil {
		eo.Clock = o.Clock
	}
	fc := feature.Config{PauseCheck: o.PauseCheck, Limiter: o.Limiter, Schedules: n.schedules,
		InjectTrace: o.InjectTrace, ExtractTrace: o.ExtractTrace}
	if o.Tracer != nil {
		fc.Tracer = tracerBridge{o.Tracer}
	}
	if o.Ledger != nil {
		fc.Ledger = o.Ledger
	}
	if o.Pauses != nil {
		fc.Pauses = o.Pauses
	}
	if o.Ticks != nil {
		fc.Ticks = o.Ticks
	}
	if o.Heartbeats != nil {
		fc.Heartbeats = o.Heartbeats
	}
	eo.Features = feature.List(fc, backend)
	if o.Backoff == nil {
		eo.Backoff = DefaultBackoff
	}
	eng, err := engine.New(backend, eo)
	if err != nil {
		return nil, err
	}
	n.eng = eng
	return n, nil
}

// ID returns the node's id.
func (n *Node) ID() string { return n.eng.ID() }

// Backend returns the node's backend.
func (n *Node) Backend() core.Backend { return n.eng.Backend() }

// Registry returns the node's registry.
func (n *Node) Registry() *Registry { return n.reg }

// Logger returns the node's logger.
func (n *Node) Logger() *slog.Logger { return n.eng.Logger() }

// Start begins fetching and running batches for the queues this node listens to. Listeners may
// also be added after Start. Start returns at once; ctx is not retained (use Close to stop).
func (n *Node) Start(ctx context.Context) error { return n.eng.Start(ctx) }

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
func (n *Node) Close(ctx context.Context) error { return n.eng.Close(ctx) }

// Stats returns the node's counters.
func (n *Node) Stats() Stats { return Stats(n.eng.Stats()) }

// Depths reports the backend's depths for every queue declared in the node's registry.
func (n *Node) Depths(ctx context.Context) (map[string]core.Depth, error) {
	return n.eng.Depths(ctx)
}

// RunHistory returns what this node ran of queue in each of the last 60 minutes, oldest first
// (the current minute last, so far); nil when the node does not listen to queue. For dashboards.
func (n *Node) RunHistory(queue string) []MinuteRuns {
	h := n.eng.RunHistory(queue)
	if h == nil {
		return nil
	}
	out := make([]MinuteRuns, len(h))
	for i, m := range h {
		out[i] = MinuteRuns(m)
	}
	return out
}

// schedules returns the registry's schedules bound to this node (feature.Config.Schedules).
func (n *Node) schedules() []feature.Schedule {
	list := n.reg.scheduleList()
	out := make([]feature.Schedule, len(list))
	for i, s := range list {
		publish := s.publish
		out[i] = feature.Schedule{Name: s.name, Queue: s.queue, Ticks: s.ticks, RunMissed: s.missed == RunMissedOnce,
			Publish: func(ctx context.Context, tick time.Time) error { return publish(ctx, n, tick) }}
	}
	return out
}

// registrySpecs is a Registry as the engine reads it (engine.Specs).
type registrySpecs struct{ r *Registry }

func (s registrySpecs) Lookup(name string) *engine.Spec {
	if q := s.r.lookup(name); q != nil {
		return &q.Spec
	}
	return nil
}

func (s registrySpecs) Names() []string { return s.r.Names() }
