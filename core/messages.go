package core

import (
	"context"
	"errors"
	"time"
)

// Errors of message lookup and cancel (the engine's Inspector, the ledger, adapters' native
// lookup).
var (
	// ErrLookupUnsupported means no source can answer a lookup or cancel by message id: no
	// ledger is configured and the backend implements neither BatchInspector nor (for a
	// cancel) BatchEditor. The wrapping message names the backend and the remedy.
	ErrLookupUnsupported = errors.New("unknown: no ledger configured and the backend cannot look up messages by id")

	// ErrMessageNotFound means the source asked knows no message with the id: never
	// published, pruned after its retention, or (without a ledger) already completed.
	ErrMessageNotFound = errors.New("txmq: message not found")

	// ErrNotCancellable means the message cannot be cancelled: it already completed, or
	// (without a ledger) its batch is running and the backend cannot take it back.
	ErrNotCancellable = errors.New("txmq: message cannot be cancelled")
)

// MessageState is where a message is in its life.
type MessageState string

// The states of a message.
const (
	// StateOutbox: in the app database's outbox, not yet stored in the backend (a flush the
	// backend refused, handed to the outbox for the recovery sweep).
	StateOutbox MessageState = "outbox"
	// StateQueued: stored and due, waiting for a node; also a message whose run's lease
	// ended without a settle (its node died or lost the lease): the backend hands its batch
	// out again.
	StateQueued MessageState = "queued"
	// StateDelayed: stored, not due before MessageInfo.Due.
	StateDelayed MessageState = "delayed"
	// StateRunning: a listener runs its batch on MessageInfo.Node since MessageInfo.UpdatedAt
	// (run number MessageInfo.Runs), under a lease its node keeps extending.
	StateRunning MessageState = "running"
	// StateRetry: its batch failed MessageInfo.Runs times (last error MessageInfo.Error) and
	// runs again at MessageInfo.Due.
	StateRetry MessageState = "retry"
	// StateDead: its batch was dead-lettered (MessageInfo.Reason, MessageInfo.Error); it can
	// be replayed from the dead-letter store.
	StateDead MessageState = "dead"
	// StateCompleted: its batch's listener succeeded (MessageInfo.Runs runs in all).
	StateCompleted MessageState = "completed"
	// StateCancelled: cancelled before it completed; no listener receives it any more.
	StateCancelled MessageState = "cancelled"
)

// MessageStates lists every state, in the order of a message's life.
var MessageStates = []MessageState{StateOutbox, StateQueued, StateDelayed, StateRunning, StateRetry, StateDead, StateCompleted, StateCancelled}

// MessageInfo is what is known of one message: what the ledger holds of it, or what an
// adapter's native lookup found.
type MessageInfo struct {
	// ID is the message id (generated, or given with txmq.ID/IDs).
	ID string `json:"id"`
	// Queue is the message's queue.
	Queue string `json:"queue"`
	// BatchID is the batch holding the message, when known.
	BatchID string `json:"batch_id,omitempty"`
	// State is the message's state.
	State MessageState `json:"state"`
	// PublishedAt is when the message was published (the earliest record of it).
	PublishedAt time.Time `json:"published_at"`
	// UpdatedAt is when the message entered State (for StateRunning the run's start, for
	// StateCompleted the completion).
	UpdatedAt time.Time `json:"updated_at"`
	// Due is when a delayed message becomes due, or when a message waiting to retry runs
	// again; zero otherwise.
	Due time.Time `json:"due,omitzero"`
	// Node is the node running the batch (StateRunning) or the last one that ran it.
	Node string `json:"node,omitempty"`
	// Runs counts the runs of the batch so far (StateRunning: this run's number).
	Runs int `json:"runs"`
	// Error is the last run's error (StateRetry, StateDead).
	Error string `json:"error,omitempty"`
	// Reason is the drop reason of a dead letter (one of the Reason constants).
	Reason string `json:"reason,omitempty"`
}

// MessageFilter selects messages for a listing. Zero fields select everything.
type MessageFilter struct {
	// Queue keeps the messages of one queue.
	Queue string
	// State keeps the messages in one state.
	State MessageState
	// Since keeps messages published at or after it.
	Since time.Time
	// Until keeps messages published before it.
	Until time.Time
	// Limit caps the number returned, newest first; 0 means DefaultMessageLimit.
	Limit int
}

// DefaultMessageLimit is a listing's cap when MessageFilter.Limit is 0.
const DefaultMessageLimit = 100

// BatchEvent is one change in the life of a batch's messages, as a node records it: the
// messages of a batch share their fate (they run, retry, dead-letter and complete as a unit),
// so one event covers them all.
type BatchEvent struct {
	// Queue and BatchID name the batch; BatchID is empty for messages staged in a transaction
	// (the outbox relay gives them their batch) and for messages a node left out of a run
	// (State StateCancelled).
	Queue, BatchID string
	// IDs are the batch's message ids (the ones that run, for StateRunning). The slice is the
	// recorder's once passed: the caller does not change it afterwards.
	IDs []string
	// State is the state the messages entered.
	State MessageState
	// PublishedAt is when the messages were published, when the event is their publish.
	PublishedAt time.Time
	// UpdatedAt is when the messages entered State.
	UpdatedAt time.Time
	// Due, Node, Runs, Error and Reason are as in MessageInfo, except that the Due of a
	// StateRunning event is the end of the run's lease (recorded at the run's start and again,
	// with the start's UpdatedAt, at each extension): a reader takes a running state whose
	// lease ended for StateQueued.
	Due    time.Time
	Node   string
	Runs   int
	Error  string
	Reason string
}

// MessageRecorder receives the life of the messages a node publishes and runs (the ledger):
// the node calls RecordBatch at every publish and outcome, and asks CancelledMessages before
// it hands a batch to its listener.
type MessageRecorder interface {
	// RecordBatch takes one event to write; it never blocks for long (a ledger buffers
	// events and writes groups).
	RecordBatch(ev BatchEvent)
	// CancelledMessages returns which of b.IDs are cancelled in batch b. A cancel applies to
	// the messages it found, never to a later publish that reuses the id: to the batch that
	// held the message when the cancel was made, and to the batches created no later than the
	// cancel (a message staged in a transaction then, which the outbox relays in a batch of
	// its own; a copy of the batch under another id).
	CancelledMessages(ctx context.Context, b CancelCheck) (map[string]bool, error)
}

// CancelCheck names the batch a node is about to run, for MessageRecorder.CancelledMessages.
type CancelCheck struct {
	// Queue and BatchID name the batch.
	Queue, BatchID string
	// Created is when the batch was made (its envelope's time, on the publishing node's
	// clock).
	Created time.Time
	// IDs are the batch's message ids.
	IDs []string
}

// MessageStore answers lookups by id and listings, and cancels (the ledger implements it).
type MessageStore interface {
	// GetMessage returns the message with id (the most recently updated one when the id was
	// used on several queues), or an error wrapping ErrMessageNotFound.
	GetMessage(ctx context.Context, id string) (MessageInfo, error)
	// ListMessages returns the messages f selects, newest first.
	ListMessages(ctx context.Context, f MessageFilter) ([]MessageInfo, error)
	// CancelMessage marks the message cancelled unless it completed (ErrNotCancellable) and
	// returns what it holds now; an unknown id wraps ErrMessageNotFound.
	CancelMessage(ctx context.Context, id string) (MessageInfo, error)
}

// BatchState is where an adapter holds a stored batch.
type BatchState int

// The states of a stored batch.
const (
	// BatchReady: due and unclaimed.
	BatchReady BatchState = iota + 1
	// BatchDelayed: waiting for its due or retry time (StoredBatch.Due), or held behind an
	// earlier batch of its ordering key (Due its own due time, or zero), as Depths counts it.
	BatchDelayed
	// BatchInFlight: claimed by a node under a lease.
	BatchInFlight
)

// StoredBatch is one batch an adapter holds, as BatchInspector reports it.
type StoredBatch struct {
	// Queue and ID name the batch.
	Queue, ID string
	// Body is the encoded envelope, read-only.
	Body []byte
	// State is where the batch is.
	State BatchState
	// Due is when a delayed batch becomes due; zero otherwise.
	Due time.Time
	// Deliveries is Claim.Deliveries of the current or last hand-out.
	Deliveries int
	// Since is when the current claim was handed out (BatchInFlight), when known.
	Since time.Time
}

// BatchInspector is an optional adapter interface: an adapter that can enumerate the batches
// it holds lets the engine look messages up by id without a ledger (the memory, sqljobs and
// Redis adapters implement it). Completed batches are gone from a backend, so such a lookup knows only
// messages not yet completed.
type BatchInspector interface {
	// InspectBatches calls fn for each batch of the named queues until fn returns false:
	// every batch stored, those held behind an earlier batch of their ordering key included.
	InspectBatches(ctx context.Context, queues []string, fn func(StoredBatch) bool) error
}

// BatchEditor is an optional adapter interface, for cancelling without a ledger: it replaces
// the body of a batch that is not claimed, or removes the batch when body is nil. A batch that
// is in flight or gone is not changed: the error wraps ErrNotCancellable (in flight) or
// ErrMessageNotFound (gone). On an ordered queue (KeyOrderer) any unclaimed batch of a key
// can be edited or removed: removing the key's first batch lets its next one become due, as
// an ack does, and a key with no batch left is no longer held (KeyHolder).
type BatchEditor interface {
	// ReplaceBatch replaces or (body nil) removes the unclaimed batch id of queue; body is
	// the adapter's for the call only.
	ReplaceBatch(ctx context.Context, queue, id string, body []byte) error
}
