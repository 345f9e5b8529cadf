package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// publish routes one encoded publish call by the queue's Transactional setting (see the routing
// table in the package doc).
func (n *Node) publish(ctx context.Context, p *Pending) error {
	spec := p.spec
	if spec.reg != n.reg { // a registry never replaces a declaration: this is a lookup
		return fmt.Errorf("%w: queue %q is not declared in this node's registry: declare it on the registry passed in NodeOptions.Registry", ErrNotDeclared, spec.name)
	}
	if n.buf.sealed.Load() {
		return fmt.Errorf("%w: queue %q: publish after Close; publish before closing the node", ErrClosed, spec.name)
	}
	if n.opts.InjectTrace != nil {
		p.Trace = n.opts.InjectTrace(ctx)
	}
	lim := n.limits(spec, p.Trace)
	if err := lim.checkSizes(p); err != nil {
		return err
	}
	p.maxBatchBytes = lim.batch
	tx, inTx := TxFromContext(ctx)
	switch {
	case inTx && (spec.tx == Require || spec.tx == Try):
		if err := tx.Stage(ctx, p); err != nil {
			return fmt.Errorf("txmq: queue %q: staging in the transaction's outbox: %w", spec.name, err)
		}
		return nil
	case spec.tx == Require:
		return fmt.Errorf("%w: queue %q is Transactional: Require; publish it inside a transaction (outbox Store.RunInTx or WithTx), or declare it Try", ErrNoTransaction, spec.name)
	case inTx: // Never inside a transaction: wait for the commit.
		if !tx.AfterCommit(func() { n.enqueue(p) }) {
			return fmt.Errorf("%w: queue %q is Transactional: Never, and this transaction cannot report its commit (an app-managed transaction); publish after committing, use Store.RunInTx, or declare the queue Try", ErrInvalidConfig, spec.name)
		}
		return nil
	default:
		n.enqueue(p)
		return nil
	}
}

// enqueue puts p in the coalescing buffer (the first message starts the flusher). Once the
// buffer is sealed (an after-commit callback that raced Close) it publishes p at once instead;
// after Halt, p is lost with the rest of the buffer, as in a crash.
func (n *Node) enqueue(p *Pending) {
	if n.buf.add(p, n.clock.Now()) {
		return
	}
	if n.halted.Load() {
		return
	}
	n.flush(context.Background(), []*queueBuffer{{spec: p.spec, pending: []*Pending{p}, messages: len(p.Messages)}}, false)
}

// flushLoop flushes due buffers every FlushTick until the buffer is sealed (Close drains the
// rest). It survives its own panics.
func (n *Node) flushLoop() {
	defer n.loops.Done()
	t := time.NewTicker(n.opts.FlushTick)
	defer t.Stop()
	for {
		select {
		case <-n.flushStop:
			return
		case <-t.C:
			n.flushDue(false)
		}
	}
}

// flushDue flushes the due buffers (all of them when all is set), recovering panics.
func (n *Node) flushDue(all bool) {
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("txmq: publish flusher panicked; continuing", "panic", r)
		}
	}()
	due := n.buf.take(n.clock.Now(), all)
	if len(due) == 0 {
		return
	}
	n.flush(context.Background(), due, true)
}

// flushAll drains the whole buffer (used by Close): publishes are tried until ctx ends, and what
// the backend did not take by then goes to the outbox.
func (n *Node) flushAll(ctx context.Context) {
	due := n.buf.take(n.clock.Now(), true)
	if len(due) == 0 {
		return
	}
	n.flush(ctx, due, true)
}

// flushConcurrency bounds parallel backend writes of one flush.
const flushConcurrency = 8

// flush encodes the given queue buffers into batches and stores them; a batch the backend
// refuses goes to the outbox, and only if that fails too is it dropped, logged and counted.
// Each batch gets its own ClaimTimeout from the moment its write starts (within ctx), so a
// large flush on a slow backend never times out the batches still waiting for a slot.
// fromBuffer says the queue buffers were taken from n.buf, whose count is lowered at the end.
func (n *Node) flush(ctx context.Context, qbs []*queueBuffer, fromBuffer bool) {
	if fromBuffer {
		total := 0
		for _, qb := range qbs {
			total += qb.messages
		}
		defer n.buf.stored(total)
	}
	now := n.clock.Now()
	var all []OutgoingBatch
	for _, qb := range qbs {
		bs, err := batches(qb.pending, now, true)
		if err != nil {
			// Dedup failed: store the messages as they are rather than lose them.
			n.log.Error("txmq: Dedup failed; storing the messages without dedup (fix the queue's Dedup func)", "queue", qb.spec.name, "error", err)
			bs, _ = batches(qb.pending, now, false)
		}
		all = append(all, bs...)
		// The envelopes hold copies of the messages: let the encoded messages go now, so a
		// large message is not held twice while it is stored.
		qb.pending = nil
	}
	if len(all) == 1 {
		n.store(ctx, all[0])
		return
	}
	sem := make(chan struct{}, flushConcurrency)
	var wg sync.WaitGroup
	for i := range all {
		b := all[i]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			n.store(ctx, b)
		}()
	}
	wg.Wait()
}

// store writes one batch to the backend within ClaimTimeout (and ctx), falling back to the
// outbox on a context of its own, so a publish that timed out is still handed off.
func (n *Node) store(ctx context.Context, b OutgoingBatch) {
	msgs := b.Messages
	pctx, cancel := context.WithTimeout(ctx, n.opts.ClaimTimeout)
	defer cancel()
	err := safeCall("backend Publish", func() error { return n.backend.Publish(pctx, b) })
	if err == nil {
		n.stats.publishedBatches.Add(1)
		n.stats.publishedMessages.Add(int64(msgs))
		if n.hooks.Published != nil {
			n.safeHook("Published", func() { n.hooks.Published(b.Queue, msgs) })
		}
		return
	}
	if errors.Is(err, ErrRejected) && !isUnavailable(err) {
		n.rejected(ctx, b, err)
		return
	}
	if n.opts.Handoff == nil {
		n.dropped(b.Queue, ReasonNoOutbox, msgs, "txmq: backend refused a batch and no outbox is configured; batch dropped", "batch", b.ID, "error", err)
		return
	}
	hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), n.opts.ClaimTimeout)
	defer hcancel()
	if herr := safeCall("outbox Handoff", func() error { return n.opts.Handoff.Handoff(hctx, []OutgoingBatch{b}) }); herr != nil {
		n.dropped(b.Queue, ReasonOutboxHandoffFailed, msgs, "txmq: backend refused a batch and the outbox insert failed too; batch dropped", "batch", b.ID, "error", err, "outbox_error", herr)
		return
	}
	n.stats.handedOff.Add(1)
	n.log.Warn("txmq: backend refused a batch; handed to the outbox for the recovery sweep", "queue", b.Queue, "batch", b.ID, "error", err)
	if n.hooks.HandedOff != nil {
		n.safeHook("HandedOff", func() { n.hooks.HandedOff(b.Queue, msgs) })
	}
}

// dropped logs and counts one dropped batch.
func (n *Node) dropped(queue, reason string, msgs int, msg string, attrs ...any) {
	n.stats.drop(reason)
	n.log.Error(msg, append([]any{"queue", queue, "reason", reason, "messages", msgs}, attrs...)...)
	if n.hooks.Dropped != nil {
		n.safeHook("Dropped", func() { n.hooks.Dropped(queue, reason, msgs) })
	}
}
