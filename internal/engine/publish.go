package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core"
)

// publisher is the publish half of an engine: the coalescing buffer (with its flights of
// ordered keys), the writes in flight that Close bounds, the close-flush state, and the
// ordering keys handed to the outbox. Each part has its own lock (buffer.mu,
// inflightWrites.mu, handedKeys.mu) or is an atomic; e is the engine, for the shared
// things (options, backend, logger, counters, the features' hooks).
type publisher struct {
	e      *Engine
	buf    *buffer
	writes inflightWrites // buffer writes in progress, whose deadlines Close shortens
	// closeFlushState is set when Close begins: every write since is bounded like the final
	// flush's.
	closeFlushState atomic.Pointer[closeFailed]
	handed          handedKeys    // keys this node handed to the outbox (see followsOutbox)
	flushStop       chan struct{} // closed when the buffer is sealed: the flusher ends
	stopFlusher     func()
	// writers is how many batches one flush writes at a time: flushConcurrency, or more on a
	// backend that stores concurrent plain publishes together (core.PublishGrouper), the
	// writers past flushConcurrency writing only such batches (groupable).
	writers      int
	groupMaxBody int // the largest body the backend groups
}

// init sets the publisher up for e; the first buffered message starts its flusher.
func (pb *publisher) init(e *Engine) {
	pb.e = e
	pb.buf = newBuffer(e.opts.FlushWindow, e.opts.FlushCap, func() {
		e.loops.Add(1)
		go pb.flushLoop()
	})
	pb.writers = flushConcurrency
	if g, ok := e.backend.(core.PublishGrouper); ok {
		size, maxBody := g.PublishGroup()
		pb.writers, pb.groupMaxBody = min(max(size, flushConcurrency), maxFlushWriters), maxBody
	}
	pb.flushStop = make(chan struct{})
	pb.stopFlusher = sync.OnceFunc(func() { close(pb.flushStop) })
}

// buffered returns the messages waiting in the buffer.
func (pb *publisher) buffered() int { return pb.buf.size() }

// sealed reports whether Close sealed the buffer: publishing fails from then on.
func (pb *publisher) sealed() bool { return pb.buf.sealed.Load() }

// seal seals the buffer (Close, once no listener runs).
func (pb *publisher) seal() { pb.buf.seal() }

// beginClose bounds every write from now on like the final flush's (see store).
func (pb *publisher) beginClose() { pb.closeFlushState.Store(&closeFailed{}) }

// boundWrites moves the deadline of every write in progress to d when d is earlier.
func (pb *publisher) boundWrites(d time.Time) { pb.writes.shorten(d) }

// discard drops what the buffer holds (Halt: lost as in a crash).
func (pb *publisher) discard() { pb.buf.discard() }

// PublishFlags say what kind of publish call a Pending comes from.
type PublishFlags struct {
	// CallerIDs: the messages have ids the caller gave (txmq.ID, txmq.IDs).
	CallerIDs bool
	// Tick: a schedule's tick, staged in the claim's transaction whatever the routing.
	Tick bool
}

// Publish routes one encoded publish call of spec's queue by its Routing and the transaction
// in ctx (see the routing table in the txmq package doc). p's messages are encoded and
// checked; Publish sets p.Batcher.
func (n *Engine) Publish(ctx context.Context, spec *Spec, p *core.Pending, f PublishFlags) error {
	return n.publish(ctx, spec, p, &pendingMeta{}, f)
}

// OnePublish is a one-message publish call's Pending, its message list and the engine's data
// about it, in one allocation (at one message per batch there is a publish call per message):
// the caller fills Pending, with Msgs[:] as its Messages, and passes it to PublishOne.
type OnePublish struct {
	Pending core.Pending
	Msgs    [1]core.Message
	meta    pendingMeta
}

// PublishOne is Publish of op.Pending.
func (n *Engine) PublishOne(ctx context.Context, spec *Spec, op *OnePublish, f PublishFlags) error {
	return n.publish(ctx, spec, &op.Pending, &op.meta, f)
}

// publish is Publish with m, the memory of p's engine data.
func (n *Engine) publish(ctx context.Context, spec *Spec, p *core.Pending, m *pendingMeta, f PublishFlags) error {
	*m = pendingMeta{spec: spec, clock: n.clock, callerIDs: f.CallerIDs, tick: f.Tick}
	p.Batcher = m
	if spec.Declared != n.specs { // a registry never replaces a declaration: this is a lookup
		return fmt.Errorf("%w: queue %q is not declared in this node's registry: declare it on the registry passed in NodeOptions.Registry", core.ErrNotDeclared, spec.Name)
	}
	if err := n.checkOrdered(spec); err != nil {
		return err
	}
	m.onePerBatch = n.onePerBatch
	if n.pub.sealed() {
		return fmt.Errorf("%w: queue %q: publish after Close; publish before closing the node", core.ErrClosed, spec.Name)
	}
	if n.tracing != nil {
		p.Trace = n.tracing.TracePublish(ctx, spec.Name, len(p.Messages))
	}
	lim := n.limits(spec, p.Trace)
	if err := lim.checkSizes(p); err != nil {
		return err
	}
	m.maxBatchBytes = int32(min(lim.batch, math.MaxInt32))
	tx, inTx := core.TxFromContext(ctx)
	switch {
	case inTx && (spec.Routing == Require || spec.Routing == Try || m.tick):
		// A schedule's tick is staged whatever the routing, Never included: its messages
		// commit with its claim (see Queue.Schedule).
		if spec.Ordered {
			n.pub.storeKeyFirst(ctx, spec, p.Key)
		}
		if err := tx.Stage(ctx, p); err != nil {
			return fmt.Errorf("txmq: queue %q: staging in the transaction's outbox: %w", spec.Name, err)
		}
		if spec.Ordered {
			n.pub.followAfterCommit(tx, spec.Name, p.Key)
		}
		n.recordCommitted(tx, p)
		return nil
	case spec.Routing == Require:
		return fmt.Errorf("%w: queue %q is Transactional: Require; publish it inside a transaction (outbox Store.RunInTx or WithTx), or declare it Try", core.ErrNoTransaction, spec.Name)
	case inTx: // Never inside a transaction: wait for the commit.
		if !tx.AfterCommit(func() { n.pub.enqueue(p) }) {
			return fmt.Errorf("%w: queue %q is Transactional: Never, and this transaction cannot report its commit (an app-managed transaction); publish after committing, use Store.RunInTx, or declare the queue Try", core.ErrInvalidConfig, spec.Name)
		}
		return nil
	default:
		n.pub.enqueue(p)
		return nil
	}
}

// enqueue puts p in the coalescing buffer (the first message starts the flusher). Once the
// buffer is sealed (an after-commit callback that raced Close) it publishes p at once instead;
// after Halt, p is lost with the rest of the buffer, as in a crash.
func (pb *publisher) enqueue(p *core.Pending) {
	n := pb.e
	if pb.buf.add(p, n.clock.Now()) {
		return
	}
	if n.halted.Load() {
		return
	}
	pb.flush(context.Background(), []*queueBuffer{{spec: meta(p).spec, pending: []*core.Pending{p}, messages: len(p.Messages)}}, false)
}

// flushLoop flushes due buffers every FlushTick until the buffer is sealed (Close drains the
// rest). It survives its own panics.
func (pb *publisher) flushLoop() {
	n := pb.e
	defer n.loops.Done()
	t := time.NewTicker(n.opts.FlushTick)
	defer t.Stop()
	for {
		select {
		case <-pb.flushStop:
			return
		case <-t.C:
			pb.flushDue(false)
		}
	}
}

// flushDue flushes the due buffers (all of them when all is set), recovering panics.
func (pb *publisher) flushDue(all bool) {
	n := pb.e
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("txmq: publish flusher panicked; continuing", "panic", r)
		}
	}()
	due := pb.buf.take(n.clock.Now(), all)
	if len(due) == 0 {
		return
	}
	pb.flush(context.Background(), due, true)
}

// flushAll drains the whole buffer (used by Close): publishes are tried until ctx ends, and what
// the backend did not take by then goes to the outbox.
func (pb *publisher) flushAll(ctx context.Context) {
	n := pb.e
	due := pb.buf.take(n.clock.Now(), true)
	if len(due) == 0 {
		return
	}
	pb.flush(ctx, due, true)
}

// closing marks the contexts of Close's final flush: each write is bounded by
// CloseFlushTimeout instead of ClaimTimeout, and once one write failed, the batches not yet
// written go straight to the outbox (see closeFlush).
type closingKey struct{}

// closeFailed is the state of one final flush, shared by its writes.
type closeFailed struct{ failed atomic.Bool }

// closeState returns the final flush's state when ctx is Close's final flush, else nil.
func closeState(ctx context.Context) *closeFailed {
	cf, _ := ctx.Value(closingKey{}).(*closeFailed)
	return cf
}

// stored is what became of a batch store wrote.
type stored int

const (
	storedBackend   stored = iota // written to the backend
	storedHandedOff               // handed to the outbox
	storedLost                    // dead-lettered or dropped (logged and counted)
)

// store writes one batch to the backend, falling back to the outbox, in four steps: the
// write's bound (writeBound), the reasons not to try the backend at all (skipBackend), the
// bounded write (write), and what became of the batch: counted (written), dead-lettered
// (rejected), or handed to the outbox on a context of its own, so that a publish that timed
// out is still handed off (handOff). toOutbox skips the backend: an earlier batch of the same
// ordered key was handed off. call, if not nil, is zeroed memory for the write's call context
// (see write).
func (pb *publisher) store(ctx context.Context, b core.OutgoingBatch, toOutbox bool, call *callCtx) stored {
	n := pb.e
	timeout, cf := pb.writeBound(ctx)
	// The ledger's time of the publish (before any node can run the batch), and the start of
	// the write's timeout: one clock read for both.
	at := time.Now()
	err := pb.skipBackend(ctx, b, toOutbox, cf)
	if err == nil {
		var sb core.OutgoingBatch
		sb, err = pb.write(ctx, b, at.Add(timeout), cf, call)
		if err != nil && pb.writeAgain(ctx, err, cf) {
			// No outbox to hand the batch to: the bound its handoff would have had goes to one
			// more write, so a backend slow for one ClaimTimeout (a SQLite file's writer, a
			// cluster creating streams) does not cost the batch. A key's later flush waits for
			// up to two bounds (waitFlight), one write and one handoff, so order is kept.
			sb, err = pb.write(ctx, b, time.Now().Add(timeout), nil, nil)
		}
		if err == nil {
			if sb.Messages == 0 {
				return storedBackend // every message was a duplicate of one already stored
			}
			pb.written(sb, at)
			return storedBackend
		}
	}
	if errors.Is(err, core.ErrRejected) && !isUnavailable(err) {
		n.rejected(ctx, b, err)
		return storedLost
	}
	return pb.handOff(ctx, b, err)
}

// writeAgain reports whether a write that failed with err is tried once more: when the node
// has no outbox (the batch would be dropped), the failure is an outage rather than a refusal,
// and Close has not begun (its flush keeps its own bound).
func (pb *publisher) writeAgain(ctx context.Context, err error, cf *closeFailed) bool {
	if pb.e.opts.Handoff != nil || cf != nil || pb.closeFlushState.Load() != nil || ctx.Err() != nil {
		return false
	}
	return isUnavailable(err)
}

// writeBound returns how long a write may take, and the state of the node's final flush when
// Close has begun (nil before). There are three regimes: a write of the final flush (ctx
// carries its state) gets CloseFlushTimeout; a regular flush's write after Close began gets
// the shorter of ClaimTimeout and CloseFlushTimeout; any other gets ClaimTimeout (and is
// shortened by Close if it begins while the write waits: see write).
func (pb *publisher) writeBound(ctx context.Context) (time.Duration, *closeFailed) {
	n := pb.e
	if cf := closeState(ctx); cf != nil {
		return n.opts.CloseFlushTimeout, cf
	}
	if cf := pb.closeFlushState.Load(); cf != nil {
		return min(n.opts.ClaimTimeout, n.opts.CloseFlushTimeout), cf
	}
	return n.opts.ClaimTimeout, nil
}

// skipBackend returns why b goes to the outbox without a write (an error marked
// core.ErrBackendUnavailable), or nil to write it: an earlier batch of its ordered key was
// handed off (toOutbox) or has rows in the outbox (followsOutbox), or a write of the node's
// final flush already failed (cf).
func (pb *publisher) skipBackend(ctx context.Context, b core.OutgoingBatch, toOutbox bool, cf *closeFailed) error {
	if toOutbox {
		return fmt.Errorf("%w: not written: an earlier batch of ordering key %q was handed to the outbox, so this one follows it there to keep the key's order", core.ErrBackendUnavailable, b.Key)
	}
	if err := pb.followsOutbox(ctx, b); err != nil {
		return err
	}
	if cf != nil && cf.failed.Load() {
		return fmt.Errorf("%w: not written: an earlier write of the node's final flush failed, so the rest of the buffer goes to the outbox without waiting for the backend", core.ErrBackendUnavailable)
	}
	return nil
}

// write writes b to the backend by deadline (and ctx), through the Writers and the
// PublishWrappers, and returns it as stored. The write is registered for Close, which
// shortens it to CloseFlushTimeout; a write registered after Close began is shortened here.
// A failed write once Close began (cf, or Close beginning while it waited) sends the rest of
// the final flush to the outbox, unless the backend refused the batch itself. in, if not nil,
// is zeroed memory for the call context (newCallIn).
func (pb *publisher) write(ctx context.Context, b core.OutgoingBatch, deadline time.Time, cf *closeFailed, in *callCtx) (core.OutgoingBatch, error) {
	n := pb.e
	pctx, call, cancel := newCallIn(ctx, deadline, in)
	if call != nil {
		defer call.cancel()
	} else {
		defer cancel()
	}
	reg := pb.writes.add(pctx)
	if cf == nil {
		if cf = pb.closeFlushState.Load(); cf != nil {
			// Close began before this write was registered: bound it like the final flush's.
			shortenCall(pctx, time.Now().Add(n.opts.CloseFlushTimeout))
		}
	}
	for _, w := range n.writers {
		w.BeforeWrite(pctx, b) // ledger mode: the ledger's copy first
	}
	sb := b
	err := safeCall("backend Publish", func() (perr error) {
		sb, perr = n.publishFn(pctx, b)
		return perr
	})
	pb.writes.remove(reg)
	if cf == nil {
		cf = pb.closeFlushState.Load() // Close began while the write waited
	}
	if err != nil && cf != nil && !(errors.Is(err, core.ErrRejected) && !isUnavailable(err)) {
		cf.failed.Store(true)
	}
	return sb, err
}

// written records, counts and reports b, stored in the backend; at is the time before the
// write began.
func (pb *publisher) written(b core.OutgoingBatch, at time.Time) {
	n := pb.e
	msgs := b.Messages
	n.recordStored(b, core.StateQueued, at)
	n.stats.publishedBatches.Add(1)
	n.stats.publishedMessages.Add(int64(msgs))
	if n.hooks.Published != nil {
		n.safeHook("Published", func() { n.hooks.Published(b.Queue, msgs) })
	}
}

// handOff gives b, which the backend did not take (err), to the outbox as a row due at once,
// on a context of its own bounded by ClaimTimeout; without an outbox, or when the insert
// fails too, the batch is dropped, logged and counted.
func (pb *publisher) handOff(ctx context.Context, b core.OutgoingBatch, err error) stored {
	n := pb.e
	msgs := b.Messages
	if n.opts.Handoff == nil {
		n.dropped(b.Queue, core.ReasonNoOutbox, msgs, "txmq: backend refused a batch and no outbox is configured; batch dropped", "batch", b.ID, "error", err)
		return storedLost
	}
	at := time.Now()
	hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), n.opts.ClaimTimeout)
	defer hcancel()
	if herr := safeCall("outbox Handoff", func() error { return n.opts.Handoff.Handoff(hctx, []core.OutgoingBatch{b}) }); herr != nil {
		n.dropped(b.Queue, core.ReasonOutboxHandoffFailed, msgs, "txmq: backend refused a batch and the outbox insert failed too; batch dropped", "batch", b.ID, "error", err, "outbox_error", herr)
		return storedLost
	}
	n.stats.handedOff.Add(1)
	if b.Key != "" {
		pb.handed.add(b.Queue, b.Key)
	}
	n.recordStored(b, core.StateOutbox, at)
	n.log.Warn("txmq: backend refused a batch; handed to the outbox for the recovery sweep", "queue", b.Queue, "batch", b.ID, "error", err)
	if n.hooks.HandedOff != nil {
		n.safeHook("HandedOff", func() { n.hooks.HandedOff(b.Queue, msgs) })
	}
	return storedHandedOff
}

// dropped logs and counts one dropped batch.
func (n *Engine) dropped(queue, reason string, msgs int, msg string, attrs ...any) {
	n.stats.drop(reason)
	n.log.Error(msg, append([]any{"queue", queue, "reason", reason, "messages", msgs}, attrs...)...)
	if n.hooks.Dropped != nil {
		n.safeHook("Dropped", func() { n.hooks.Dropped(queue, reason, msgs) })
	}
}
