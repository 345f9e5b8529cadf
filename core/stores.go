package core

// This file holds the contracts of the stores beside a backend, usually in the app's
// database, and when the engine calls them. Package outbox implements Tx, Handoff (with
// KeyLister), DeadLetterSink and (its Limits) Limiter; package ledger implements
// MessageRecorder and MessageStore.
//
//	Tx, Pending, Batcher  a publish whose ctx carries a Tx (ContextWithTx): Stage, AfterCommit
//	Handoff               the publish buffer, for a flush the backend refused
//	KeyLister             the publish buffer, once, before its first write of an ordered key
//	DeadLetterSink        the runner's terminal path (internal/engine), when it gives a batch up
//	MessageRecorder       every publish and outcome; before a batch is handed to its listener
//	MessageStore          the Inspector, when a ledger is configured
//	Limiter               the driver, before it fetches for a rate-limited queue (ratelimit.go)
//
// HeartbeatStore (heartbeat.go, package outbox's Nodes) takes the nodes' heartbeat rows.
//
// The store contracts of the schedules (txmq.TickClaimer) and of pauses (txmq.PauseSource) are
// declared in package txmq, next to the features that use them.

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Tx is an app database transaction that publishes can join. The outbox package implements it
// for pgx and database/sql; the engine routes publishes into it by the queue's Transactional
// setting.
// Put one in a context with ContextWithTx.
type Tx interface {
	// Stage takes the messages of one publish call on a Require or Try queue. The transaction
	// writes them as outbox rows before it commits (now, or in a before-commit step), so they
	// are published if and only if it commits. An error fails the publish call.
	Stage(ctx context.Context, p *Pending) error
	// AfterCommit registers fn to run once after the transaction commits, never on rollback.
	// It returns false when the transaction cannot tell when it commits (an app-managed
	// transaction), in which case Never queues cannot be published inside it.
	AfterCommit(fn func()) bool
}

// Pending is the encoded messages of one publish call (or several, merged) for one queue and due
// time, before they are cut into batches.
type Pending struct {
	// Queue is the queue name.
	Queue string
	// Messages are the encoded messages, with their ids.
	Messages []Message
	// NotBefore is the earliest delivery time; zero means now.
	NotBefore time.Time
	// Trace is the publisher's trace context, if any.
	Trace map[string]string
	// Key is the ordering key of an ordered queue's publish (empty otherwise): batches hold
	// the messages of one key only, in the order the key's publishes were made or staged.
	Key string
	// Priority is the publish's priority on a prioritized queue (MinPriority to MaxPriority),
	// MinPriority otherwise: publishes of different priorities never share a batch.
	Priority int
	// FairKey is the publish's fairness key on a fair queue (empty otherwise, and a key of
	// its own on a fair queue): publishes of different fairness keys never share a batch.
	FairKey string

	// Batcher is what cuts this publish into batches: the queue's settings, the publishing
	// node's clock (on which NotBefore was computed) and the size limits in force when the call
	// was published. The node that made the Pending sets it; a Tx passes it on untouched.
	Batcher Batcher
}

// Message is one encoded message of a publish call.
type Message struct {
	// ID is the message id, assigned at publish.
	ID string
	// Body is the message's JSON.
	Body json.RawMessage
	// Headers are the message's headers (txmq.Headers and publish middleware), nil for none;
	// they travel with it in its batch's envelope.
	Headers map[string]string
	// Unique is the message's unique key on a queue with txmq.QueueConfig.Unique (empty when
	// the message is not checked): such a message is stored in a batch of its own, whose
	// OutgoingBatch.Unique carries the key.
	Unique string
}

// Batcher cuts the Pendings of one queue into encoded batches. The engine implements it; a Tx
// (the outbox) reaches it through Batches.
type Batcher interface {
	// Batches cuts ps (all of one queue) into batches; see the package function Batches.
	Batches(ps []*Pending, now time.Time) ([]OutgoingBatch, error)
}

// Handoff takes batches that the backend refused at flush time (or that a closing node could
// not publish in time). The outbox implements it by writing rows due at once, which its next
// recovery sweep publishes.
type Handoff interface {
	// Handoff stores the batches durably or returns an error.
	Handoff(ctx context.Context, batches []OutgoingBatch) error
}

// KeyLister is implemented by a Handoff (the outbox) that can list the ordering keys it holds
// batches of. A node asks it once, before it writes its first batch of an ordered key, so that
// the keys an earlier node of the app left in the outbox (handed off by a node that closed
// during an outage, or committed in transactions whose publish failed) are followed, as the
// keys it hands off itself are (see KeyHolder).
type KeyLister interface {
	// HeldKeys returns, per queue of queues, the ordering keys the outbox holds batches of.
	HeldKeys(ctx context.Context, queues []string) (map[string][]string, error)
}

// DeadLetterSink stores batches that the engine gave up on (the retry and dead-letter policy
// is the engine's: internal/engine/worker.go), so an operator can inspect and replay them. The outbox
// package implements it in the app's database.
//
// The terminal path (dead letter, OnError) runs once per batch id: a batch whose Drop failed
// comes back after its lease expires, possibly on another node. A node remembers the batch ids
// it dead-lettered, with their replay generation (bounded, in memory), and drops such a batch
// again quietly (a replay of it is a new generation, which runs); a sink makes that
// hold across nodes and restarts by returning ErrAlreadyDeadLettered for a batch id it already
// holds (keeping the first reason, error and attempts), and the engine then skips OnError.
// Without a sink, the guarantee is per node only: another node may call OnError a second time.
type DeadLetterSink interface {
	// DeadLetter stores one dropped batch or returns an error; for a batch (queue and
	// non-empty batch id) it already holds as dead, it keeps the stored row as is and returns
	// an error wrapping ErrAlreadyDeadLettered.
	DeadLetter(ctx context.Context, dl *DeadLetter) error
}

// DeadLetter is a batch that the engine gave up on.
type DeadLetter struct {
	// Queue is the batch's queue.
	Queue string
	// BatchID is the batch id (empty if the batch could not be decoded).
	BatchID string
	// Body is the batch as stored, replayable as is.
	Body []byte
	// Reason is one of the Reason constants.
	Reason string
	// Error is the last error's text.
	Error string
	// Attempts is the number of runs spent.
	Attempts int
	// Messages is the number of messages (0 if undecodable).
	Messages int
	// Exclusive is the queue's Exclusive setting, so a replay publishes the batch the same way.
	Exclusive bool
	// At is when the engine gave up.
	At time.Time
	// Replays is the batch's replay generation (how many times it was replayed from the dead
	// letters; 0 for a batch never replayed). A sink that holds the batch as replayed takes a
	// dead letter of a generation below its replay count for the original (or an earlier
	// replay) coming back after a failed Drop, not a failure of the replay: it keeps its row
	// and answers ErrAlreadyDeadLettered, as for a batch still dead. A sink that makes a new
	// row for the batch (its earlier one purged) starts the row's replay count at Replays.
	Replays int
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

// MessageInfo is what is known of one message: what the ledger holds of it, or what an
// BulkResult says what an operator's bulk action (txmq.Inspector's CancelWhere or RunNow) did:
// Done messages changed, Skipped ones found but left (claimed by a node, completed or gone in
// between).
type BulkResult struct {
	Done, Skipped int
}

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
	// Priority is the batch's priority on a prioritized queue (0 otherwise), when the source
	// reads the batch (a backend's native lookup); the ledger does not keep it.
	Priority int `json:"priority,omitempty"`
	// FairKey is the batch's fairness key on a fair queue (empty otherwise), when the source
	// reads the batch (a backend's native lookup); the ledger does not keep it.
	FairKey string `json:"fair_key,omitempty"`
}

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

// Limiter hands out the start tokens of rate-limited queues. Nodes that share one share each
// queue's limit cluster-wide: the outbox's store is one (a row per queue in the app database),
// and an adapter may implement it too (a node uses NodeOptions.Limiter first, then its
// backend if that is a Limiter, then a limiter of its own).
type Limiter interface {
	// Take takes up to want tokens of queue's bucket and returns how many it got and, when it
	// got none, how long until the next token.
	Take(ctx context.Context, queue string, want int, limit RateLimit) (got int, retryIn time.Duration, err error)
	// Return gives back n tokens taken but not used (the fetch found fewer batches).
	Return(ctx context.Context, queue string, n int, limit RateLimit) error
}

// RateLimit caps how many batches of a queue start per period: a token bucket that holds at
// most Burst tokens and gains Batches tokens per Per; starting a batch takes one.
type RateLimit struct {
	// Batches is how many batches may start per Per.
	Batches int
	// Per is the period. With Batches, it sets the rate: 20 per second is {20, time.Second}.
	Per time.Duration
	// Burst is how many batches may start at once after an idle spell. Default Batches.
	Burst int
}
