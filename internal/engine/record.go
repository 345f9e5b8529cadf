package engine

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// The engine's side of the Recorder extension point (extend.go): the events of a batch's
// messages, sent to the plugged Recorder (the ledger, feature/record), and the cancelled
// messages left out of a run. Without a Recorder every call here is a no-op.

// PublishStored writes b, a batch kept elsewhere (ledger mode's republisher), to the backend
// as the publisher would (through the PublishWrappers): caller ids that deduplicate still do.
// A panic becomes an error.
func (n *Engine) PublishStored(ctx context.Context, b core.OutgoingBatch) error {
	if b.DedupWindow <= 0 { // caller ids that deduplicate still do when republished
		b.DedupWindow, b.DedupIDs = envelope.DedupOf(b.Body)
	}
	if b.Priority == 0 && b.Lead == 0 { // and a prioritized queue's batch its priority
		b.Priority, b.Lead = envelope.PriorityOf(b.Body)
	}
	if b.FairKey == "" { // and a fair queue's batch its fairness key
		b.FairKey = envelope.FairKeyOf(b.Body)
	}
	if b.Unique.Mode == 0 { // and a unique queue's batch its key
		b.Unique = envelope.UniqueOf(b.Body)
	}
	return safeCall("backend Publish", func() error {
		_, err := n.publishFn(ctx, b)
		return err
	})
}

// record sends ev, for the messages ids of the batch, to the Recorder; no Recorder or no ids
// is a no-op. ids becomes the recorder's: the caller does not change it afterwards. A
// panicking recorder is logged, never propagated.
func (n *Engine) record(queue, batchID string, ids []string, ev core.BatchEvent) {
	rec := n.recorder
	if rec == nil || len(ids) == 0 {
		return
	}
	ev.Queue, ev.BatchID, ev.IDs = queue, batchID, ids
	n.guard("ledger", func() { rec.Record(ev) })
}

// ledgerRun is what a run's running event told the ledger, for the events of its lease
// extensions. A running holds a pointer to it, made only with a ledger: inline it was a fifth
// of every run's record.
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
	if n.recorder == nil || len(ids) == 0 {
		return
	}
	rn.fences.mu.Lock()
	r.ledger = &ledgerRun{batch: batch, ids: ids, start: start, run: run}
	until := r.fenceAt.Add(rn.margin)
	rn.fences.mu.Unlock()
	n.guard("ledger", func() { n.recorder.Running(r.claim.Queue, batch, ids, run, start, until) })
}

// recordExtended records the lease end an extension confirmed for r's run (an event as old
// as the run's start, so it never moves the batch past a later event). Before the run's
// start is recorded it records nothing: that event carries the lease.
func (rn *runner) recordExtended(r *running) {
	n := rn.e
	if n.recorder == nil {
		return
	}
	rn.fences.mu.Lock()
	lr := r.ledger
	until := r.fenceAt.Add(rn.margin)
	rn.fences.mu.Unlock()
	if lr == nil {
		return
	}
	n.guard("ledger", func() { n.recorder.Running(r.claim.Queue, lr.batch, lr.ids, lr.run, lr.start, until) })
}

// recordStored records a batch the backend (or, with state StateOutbox, the outbox) took; at
// is the time before the write started, so that the event is older than any run's (a node
// may run the batch before this one's write returns).
func (n *Engine) recordStored(b core.OutgoingBatch, state core.MessageState, at time.Time) {
	if n.recorder == nil || len(b.MessageIDs) == 0 {
		return
	}
	n.guard("ledger", func() { n.recorder.Stored(b, state, at) })
}

// recordCommitted records the messages of a publish staged in a transaction once it commits
// (the outbox relay stores them in the backend right after the commit).
func (n *Engine) recordCommitted(tx core.Tx, p *core.Pending) {
	if n.recorder == nil || len(p.Messages) == 0 {
		return
	}
	ids := make([]string, len(p.Messages))
	for i, m := range p.Messages {
		ids[i] = m.ID
	}
	queue, due := p.Queue, p.NotBefore
	now := time.Now() // before the commit: older than any run of these messages
	tx.AfterCommit(func() {
		n.guard("ledger", func() { n.recorder.Committed(queue, ids, due, now) })
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
	d2, err := safeDecode(l, envelope.Encode(env), env.ID)
	if err != nil {
		return d
	}
	n.log.Info("txmq: cancelled messages left out of the batch", "queue", c.Queue, "batch", d.ID, "cancelled", len(ids)-len(keepIDs), "left", len(keepIDs))
	return d2
}

// cancelledOf asks the Recorder which messages are cancelled, turning a panic into an error.
func (n *Engine) cancelledOf(ctx context.Context, b core.CancelCheck) (out map[string]bool, err error) {
	err = safeCall("ledger CancelledMessages", func() error {
		var e error
		out, e = n.recorder.Cancelled(ctx, b)
		return e
	})
	return out, err
}
