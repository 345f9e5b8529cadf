// Package record is the ledger's events (NodeOptions.Ledger, package ledger): an
// engine.Recorder that turns what the engine tells it (a batch stored in the backend or the
// outbox, a transaction committed, a run started or its lease extended, a batch settled)
// into core.BatchEvents for a core.MessageRecorder, and answers which messages of a claimed
// batch are cancelled. Ledger mode's copies are another feature (feature/ledgermode).
package record

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// Ledger is the record feature: an engine.Attacher and an engine.Recorder over a
// core.MessageRecorder.
type Ledger struct {
	l    core.MessageRecorder
	node string
}

// New returns the record feature over l (nil: no feature, New returns nil).
func New(l core.MessageRecorder) *Ledger {
	if l == nil {
		return nil
	}
	return &Ledger{l: l}
}

// Attach implements engine.Attacher: the events of runs name the engine's node.
func (r *Ledger) Attach(e *engine.Engine) { r.node = e.ID() }

// Stored implements engine.Recorder: a batch the backend (state core.StateQueued, or
// core.StateDelayed when it has a delay) or the outbox (core.StateOutbox) took at at.
func (r *Ledger) Stored(b core.OutgoingBatch, state core.MessageState, at time.Time) {
	ev := core.BatchEvent{State: state, PublishedAt: at, UpdatedAt: at}
	if b.Delay > 0 {
		ev.Due = at.Add(b.Delay)
		if state == core.StateQueued {
			ev.State = core.StateDelayed
		}
	}
	r.send(b.Queue, b.ID, b.MessageIDs, ev)
}

// Committed implements engine.Recorder: the messages of a publish staged in a transaction,
// which the outbox relay stores in the backend right after the commit.
func (r *Ledger) Committed(queue string, ids []string, due, at time.Time) {
	ev := core.BatchEvent{State: core.StateQueued, PublishedAt: at, UpdatedAt: at}
	if due.After(at) {
		ev.State, ev.Due = core.StateDelayed, due
	}
	r.send(queue, "", ids, ev)
}

// Running implements engine.Recorder: run number run started at start on this node, its
// lease ending at leaseEnd. A ledger reads a running message whose lease ended as ready
// again: its node died or lost the lease, and the backend hands the batch out again. An
// extension's event is as old as the run's start, so it never moves the batch past a later
// event.
func (r *Ledger) Running(queue, batch string, ids []string, run int, start, leaseEnd time.Time) {
	r.send(queue, batch, ids, core.BatchEvent{State: core.StateRunning, UpdatedAt: start, Due: leaseEnd, Node: r.node, Runs: run})
}

// Record implements engine.Recorder: an event the engine built (Queue, BatchID, IDs and Node
// set), stamped now when it has no time.
func (r *Ledger) Record(ev core.BatchEvent) {
	if ev.UpdatedAt.IsZero() {
		ev.UpdatedAt = time.Now()
	}
	r.l.RecordBatch(ev)
}

// Cancelled implements engine.Recorder with the ledger's CancelledMessages.
func (r *Ledger) Cancelled(ctx context.Context, c core.CancelCheck) (map[string]bool, error) {
	return r.l.CancelledMessages(ctx, c)
}

// send records ev for the messages ids of the batch; no ids is a no-op.
func (r *Ledger) send(queue, batch string, ids []string, ev core.BatchEvent) {
	if len(ids) == 0 {
		return
	}
	ev.Queue, ev.BatchID, ev.IDs = queue, batch, ids
	r.Record(ev)
}
