package txmq

import (
	"context"
	"fmt"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/inspect"
)

// MessageInfo is what the Inspector knows of a message: its queue, batch, state and the
// details of that state (see core.MessageInfo).
type MessageInfo = core.MessageInfo

// MessageFilter selects messages for Inspector.List (see core.MessageFilter).
type MessageFilter = core.MessageFilter

// MessageState is where a message is in its life (core.StateQueued, core.StateRunning, ...).
type MessageState = core.MessageState

// Errors of the Inspector.
var (
	// ErrLookupUnsupported: no ledger is configured and the backend cannot look messages up
	// by id (or, for Cancel, cannot take a message back).
	ErrLookupUnsupported = core.ErrLookupUnsupported
	// ErrMessageNotFound: no message has the id (or it was pruned, or, without a ledger,
	// completed).
	ErrMessageNotFound = core.ErrMessageNotFound
	// ErrNotCancellable: the message completed, or (without a ledger) its batch runs.
	ErrNotCancellable = core.ErrNotCancellable
)

// Inspector answers "what happened to message X?": Get by id, List by queue, state and
// publish time, and Cancel. Its source is, in order:
//
//   - the ledger (Config.Ledger, NodeOptions.Ledger implementing core.MessageStore): every
//     state of every message on every backend, completed ones until the ledger's retention;
//   - else the backend's native lookup, when its adapter implements the optional
//     core.BatchInspector (memory, SQL jobs and Redis do): the messages the backend still
//     holds (queued, delayed, waiting to retry, running), never completed or dead-lettered
//     ones; Cancel there needs core.BatchEditor too (memory, SQL jobs) and refuses a running
//     batch;
//   - else every call fails with an error wrapping ErrLookupUnsupported naming the backend.
//
// Cancel never interrupts a running batch: with a ledger, a message cancelled while its batch
// runs is not run again if that run fails, and shows completed if it succeeds. A cancel
// applies to the message it found, never to a later publish that reuses the id: that one runs,
// and Get reports its state.
type Inspector struct {
	store   core.MessageStore
	backend core.Backend
	queues  func() []string
	name    string // the backend as named in errors
}

// in is the Inspector's implementation (package internal/inspect) on its current sources.
func (i *Inspector) in() *inspect.Inspector {
	return inspect.New(i.store, i.backend, i.queues, i.name)
}

// NewInspector returns an Inspector reading store when it is not nil, else backend's native
// lookup. Apps get theirs from App.Inspector or Node.Inspector.
func NewInspector(store core.MessageStore, backend core.Backend) *Inspector {
	return &Inspector{store: store, backend: backend, name: fmt.Sprintf("%T", backend)}
}

// Inspector returns an Inspector on this node's ledger (NodeOptions.Ledger, when it
// implements core.MessageStore), else on its backend's native lookup over the queues of the
// node's registry.
func (n *Node) Inspector() *Inspector {
	store, _ := n.opts.Ledger.(core.MessageStore)
	i := NewInspector(store, n.eng.Backend())
	i.queues = n.reg.Names
	return i
}

// Inspector returns the app's Inspector (see Node.Inspector), naming the backend by its URL.
func (a *App) Inspector() *Inspector {
	i := a.Node.Inspector()
	if a.Ledger != nil {
		i.store = a.Ledger
	}
	if a.backendName != "" {
		i.name = a.backendName
	}
	return i
}

// Get returns what is known of the message with id.
func (i *Inspector) Get(ctx context.Context, id string) (MessageInfo, error) {
	return i.in().Get(ctx, id)
}

// List returns the messages f selects, newest published first, at most f.Limit
// (core.DefaultMessageLimit when 0).
func (i *Inspector) List(ctx context.Context, f MessageFilter) ([]MessageInfo, error) {
	return i.in().List(ctx, f)
}

// Cancel cancels the message with id unless it completed, and returns what is known of it
// now. With a ledger it works on every backend: nodes leave a cancelled message out of its
// batch before the listener sees it, and ack a batch left empty. Without one it needs an
// adapter implementing core.BatchEditor (memory): the message is taken out of its stored
// batch, which must not be running. A running batch is never interrupted.
func (i *Inspector) Cancel(ctx context.Context, id string) (MessageInfo, error) {
	return i.in().Cancel(ctx, id)
}

// CanCancel returns nil when the Inspector can cancel messages (a ledger, or a backend
// implementing core.BatchEditor: memory, SQL jobs), else an error wrapping
// ErrLookupUnsupported saying why, for a page or command to show instead of the action.
func (i *Inspector) CanCancel() error { return i.in().CanCancel() }

// CancelWhere cancels every message of f.Queue (required) in f.State (one of BulkStates,
// required) published in f's time range, as Cancel does one; f.Limit is ignored. A message
// claimed, completed or gone meanwhile is skipped, never an error. With a ledger the
// messages are cancelled one by one; else (core.BatchEditor) each batch is edited once,
// taking its selected messages out or removing it when none is left.
func (i *Inspector) CancelWhere(ctx context.Context, f MessageFilter) (BulkResult, error) {
	return i.in().CancelWhere(ctx, f)
}

// Payload returns the payload of the message with id in queue ("" for any queue), one JSON
// value as published. Payloads come from the backend's native lookup (core.BatchInspector:
// memory, SQL jobs, Redis) whether or not a ledger is configured, since the ledger keeps
// states, not payloads: a message the backend no longer holds (completed, dead-lettered) has
// none here (a dead letter's payload is in its dead-letter row). The error wraps
// ErrLookupUnsupported when the backend cannot look up, ErrMessageNotFound when it does not
// hold the message.
func (i *Inspector) Payload(ctx context.Context, queue, id string) ([]byte, error) {
	return i.in().Payload(ctx, queue, id)
}

// Payloads returns the payloads of the messages of ids that the backend still holds, by id,
// in one pass over queue's batches ("" for every queue), as Payload does for one. An id the
// backend does not hold is absent from the map.
func (i *Inspector) Payloads(ctx context.Context, queue string, ids []string) (map[string][]byte, error) {
	return i.in().Payloads(ctx, queue, ids)
}

// CanRunNow returns nil when the Inspector can make waiting messages due now: the backend
// looks batches up (core.BatchInspector) and expedites them (core.BatchExpediter: memory, SQL
// jobs on PostgreSQL), ledger or not; else an error wrapping ErrLookupUnsupported saying why.
func (i *Inspector) CanRunNow() error { return i.in().CanRunNow() }

// RunNow makes every batch of f.Queue (required) holding messages in f.State (one of
// RunNowStates, required) and published in f's time range due now, so that a node claims it
// at once; f.Limit is ignored. The batch runs whole, with its attempt count unchanged (a
// retry keeps its budget). A batch held behind its ordering key still waits for the key. A
// batch claimed or gone meanwhile is skipped, never an error. The result counts messages.
func (i *Inspector) RunNow(ctx context.Context, f MessageFilter) (BulkResult, error) {
	return i.in().RunNow(ctx, f)
}

// BulkStates are the states a bulk cancel (Inspector.CancelWhere) selects from: messages
// waiting to run. A running batch is never interrupted, so StateRunning is not one.
var BulkStates = inspect.BulkStates

// RunNowStates are the states Inspector.RunNow selects from: messages waiting for a due or a
// retry time.
var RunNowStates = inspect.RunNowStates

// BulkResult says what a bulk action did: Done messages changed, Skipped ones found but
// left (claimed by a node, completed or gone in between).
type BulkResult = core.BulkResult
