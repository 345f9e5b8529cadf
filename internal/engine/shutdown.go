package engine

import (
	"context"
	"fmt"
	"time"
)

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
func (n *Engine) Close(ctx context.Context) error {
	if !n.drv.markClosed(func() {
		n.pub.beginClose()
		n.closing.Store(true)
	}) {
		select {
		case <-n.closeDone:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("txmq: node %s: still closing when this Close gave up: %w", n.id, ctx.Err())
		}
	}
	defer n.closeDoneFn()
	report := n.beginCloseReport()
	// A write of the publish buffer already waiting on a hung backend gets no longer than a
	// write of the final flush: Close waits for it (the flusher), and a failed write goes to
	// the outbox like any other.
	n.pub.boundWrites(time.Now().Add(n.opts.CloseFlushTimeout))
	n.stop()
	n.drv.cancelFetch()
	// The buffer drains on its own bounded context: ctx bounds only the wait for listeners.
	n.pub.closeFlush()
	err := report.waitRunning(ctx)
	n.run.cancelRunning()
	// No listener runs any more: from here publishing fails, and an after-commit publish
	// goes straight to the backend.
	n.pub.seal()
	n.pub.stopFlusher()
	n.loops.Wait()
	n.pub.closeFlush() // what listeners published while Close waited for them
	report.end(err)
	return err
}

// closeFlush drains the publish buffer for Close on a context of its own, detached from
// Close's ctx. Every batch is written while the backend accepts them, each write bounded by
// CloseFlushTimeout, so a healthy backend loses nothing however large the buffer; once one
// write fails, the batches not yet written go straight to the outbox (or are dropped and
// counted without one), so a backend that is down delays Close by about one CloseFlushTimeout
// plus the outbox inserts.
func (pb *publisher) closeFlush() {
	cf := pb.closeFlushState.Load()
	if cf == nil {
		cf = &closeFailed{}
	}
	pb.flushAll(context.WithValue(context.Background(), closingKey{}, cf))
}

// Halt stops the node at once as if its process died: no settle, no lease extension, no drain;
// buffered messages are lost and claimed batches come back after their leases expire. It is
// for crash tests (tests reach it as txmqtest.Halt) and never needed in an app.
func (n *Engine) Halt() {
	n.halted.Store(true)
	n.drv.markClosed(nil)
	n.stop()
	n.drv.cancelFetch()
	n.run.cancelRunning()
	n.pub.discard()
	n.pub.stopFlusher()
	n.loops.Wait()
	n.closeDoneFn()
}

// cancelRunning cancels the contexts of every running listener. A worker that registers its
// claim after this finds runCtx done and cancels its own.
func (rn *runner) cancelRunning() {
	n := rn.e
	n.run.runCancel()
	for _, r := range rn.fences.snapshot() {
		r.cancel(context.Canceled)
	}
}

// Freeze simulates a paused process (a long GC pause, SIGSTOP, an overloaded VM) for fault
// tests (txmqtest.Freeze): the node stops fetching and extending leases until Thaw, while its
// running listeners go on. Its fence timers still run, so a claim not confirmed extended
// before LeaseUntil - LeaseMargin is cancelled with ErrLeaseLost and never settled. It is
// never needed in an app.
func (n *Engine) Freeze() {
	n.frozen.Store(true)
	n.drv.cancelFetch()
}

// Thaw ends a freeze: the node fetches and extends leases again.
func (n *Engine) Thaw() {
	n.frozen.Store(false)
	n.drv.signal()
}
