package engine

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// PublishStored writes b, a batch kept elsewhere (ledger mode's republisher), to the backend
// as the publisher would: caller ids that deduplicate still do. A panic becomes an error.
func (n *Engine) PublishStored(ctx context.Context, b core.OutgoingBatch) error {
	if b.DedupWindow <= 0 { // caller ids that deduplicate still do when republished
		b.DedupWindow, b.DedupIDs = envelope.DedupOf(b.Body)
	}
	return safeCall("backend Publish", func() error {
		_, err := n.publishBatch(ctx, b)
		return err
	})
}

// record sends one event for the batch's messages ids to the node's ledger
// (NodeOptions.Ledger), built from ev; a nil ledger or no ids is a no-op. ids becomes the
// ledger's: the caller does not change it afterwards. A panicking ledger is logged, never
// propagated.
func (n *Engine) record(queue, batchID string, ids []string, ev core.BatchEvent) {
	lg := n.opts.Ledger
	if lg == nil || len(ids) == 0 {
		return
	}
	if ev.UpdatedAt.IsZero() {
		ev.UpdatedAt = time.Now()
	}
	ev.Queue, ev.BatchID, ev.IDs = queue, batchID, ids
	n.guard("ledger", func() { lg.RecordBatch(ev) })
}

// ledgerRun is what a run's running event told the ledger, for the events of its lease
// extensions.
type ledgerRun struct {
	batch string
	ids   []string
	start time.Time
	run   int
}

// recordRunning records the start of run number run of batch (its messages ids) at start,
// with the end of the lease the node holds, and keeps what it recorded in r for the
// extensions (recordExtended). A ledger reads a running message whose lease ended as ready
// again: its node died or lost the lease, and the backend hands the batch out again.
func (rn *runner) recordRunning(r *running, batch string, ids []string, start time.Time, run int) {
	n := rn.e
	if n.opts.Ledger == nil {
		return
	}
	rn.fences.mu.Lock()
	r.ledger = ledgerRun{batch: batch, ids: ids, start: start, run: run}
	until := r.fenceAt.Add(rn.margin)
	rn.fences.mu.Unlock()
	n.record(r.claim.Queue, batch, ids, core.BatchEvent{State: core.StateRunning, UpdatedAt: start, Due: until, Node: n.id, Runs: run})
}

// recordExtended records the lease end an extension confirmed for r's run (an event as old
// as the run's start, so it never moves the batch past a later event). Before the run's
// start is recorded it records nothing: that event carries the lease.
func (rn *runner) recordExtended(r *running) {
	n := rn.e
	if n.opts.Ledger == nil {
		return
	}
	rn.fences.mu.Lock()
	lr := r.ledger
	until := r.fenceAt.Add(rn.margin)
	rn.fences.mu.Unlock()
	if lr.ids == nil {
		return
	}
	n.record(r.claim.Queue, lr.batch, lr.ids, core.BatchEvent{State: core.StateRunning, UpdatedAt: lr.start, Due: until, Node: n.id, Runs: lr.run})
}

// recordStored records a batch the backend (or, with state StateOutbox, the outbox) took; at
// is the time before the write started, so that the event is older than any run's (a node
// may run the batch before this one's write returns).
func (n *Engine) recordStored(b core.OutgoingBatch, state core.MessageState, at time.Time) {
	if n.opts.Ledger == nil {
		return
	}
	ev := core.BatchEvent{State: state, PublishedAt: at, UpdatedAt: at}
	if b.Delay > 0 {
		ev.Due = at.Add(b.Delay)
		if state == core.StateQueued {
			ev.State = core.StateDelayed
		}
	}
	n.record(b.Queue, b.ID, b.MessageIDs, ev)
}

// recordCommitted records the messages of a publish staged in a transaction once it commits
// (the outbox relay stores them in the backend right after the commit).
func (n *Engine) recordCommitted(tx core.Tx, p *core.Pending) {
	if n.opts.Ledger == nil {
		return
	}
	ids := make([]string, len(p.Messages))
	for i, m := range p.Messages {
		ids[i] = m.ID
	}
	due := p.NotBefore
	now := time.Now() // before the commit: older than any run of these messages
	tx.AfterCommit(func() {
		ev := core.BatchEvent{State: core.StateQueued, PublishedAt: now, UpdatedAt: now}
		if due.After(now) {
			ev.State, ev.Due = core.StateDelayed, due
		}
		n.record(p.Queue, "", ids, ev)
	})
}

// dropCancelled asks the ledger which messages of the claimed batch are cancelled (in this
// batch: a cancel applies to the batches it found, never to a later publish of the id). When none
// are, it returns d. When some are, it returns the batch decoded without them; when all are,
// it acks the batch and returns nil (nothing to run). A ledger that does not answer is logged
// and the batch runs whole: delivery is at least once.
func (rn *runner) dropCancelled(r *running, l *Listener, d *Batch, ids []string) *Batch {
	n := rn.e
	c := r.claim
	ctx, cancel := n.claimCtx()
	cancelled, err := n.cancelledOf(ctx, core.CancelCheck{Queue: c.Queue, BatchID: d.ID, Created: d.Created, IDs: ids})
	cancel()
	if err != nil {
		n.log.Warn("txmq: the ledger did not say which messages are cancelled; running the batch whole", "queue", c.Queue, "batch", d.ID, "error", err)
		return d
	}
	if len(cancelled) == 0 {
		return d
	}
	if len(cancelled) >= len(ids) {
		n.log.Info("txmq: every message of the batch is cancelled; acking it without a run", "queue", c.Queue, "batch", d.ID, "messages", len(ids))
		rn.settleErr(c, "ack", rn.settle(r, "Ack", func(ctx context.Context) error { return n.backend.Ack(ctx, c) }))
		return nil
	}
	env, err := envelope.Decode(c.Body)
	if err != nil {
		return d
	}
	env.KeepMessages(func(i int) bool { return !cancelled[env.MessageIDs[i]] })
	// The left-out messages leave the batch in the ledger: its completion is not theirs.
	left := make([]string, 0, len(cancelled))
	for _, id := range ids {
		if cancelled[id] {
			left = append(left, id)
		}
	}
	n.record(c.Queue, "", left, core.BatchEvent{State: core.StateCancelled, Node: n.id})
	keepIDs := env.MessageIDs
	d2, err := safeDecode(l, envelope.Encode(env))
	if err != nil {
		return d
	}
	n.log.Info("txmq: cancelled messages left out of the batch", "queue", c.Queue, "batch", d.ID, "cancelled", len(ids)-len(keepIDs), "left", len(keepIDs))
	return d2
}

// cancelledOf calls the ledger's CancelledMessages, turning a panic into an error.
func (n *Engine) cancelledOf(ctx context.Context, b core.CancelCheck) (out map[string]bool, err error) {
	err = safeCall("ledger CancelledMessages", func() error {
		var e error
		out, e = n.opts.Ledger.CancelledMessages(ctx, b)
		return e
	})
	return out, err
}
