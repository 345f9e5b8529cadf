package core

import (
	"context"
	"time"
)

// Handoff takes batches that the backend refused at flush time. The outbox implements it by
// writing rows with no next-attempt time, which its recovery sweep republishes later.
type Handoff interface {
	// Handoff stores the batches durably or returns an error.
	Handoff(ctx context.Context, batches []OutgoingBatch) error
}

// DeadLetterSink stores batches that core gave up on, so an operator can inspect and replay them.
// The outbox package implements it in the app's database.
//
// The terminal path (dead letter, OnError) runs once per batch id: a batch whose Drop failed
// comes back after its lease expires, possibly on another node. A node remembers the batch ids
// it dead-lettered (bounded, in memory) and drops such a batch again quietly; a sink makes that
// hold across nodes and restarts by returning ErrAlreadyDeadLettered for a batch id it already
// holds (keeping the first reason, error and attempts), and core then skips OnError. Without a
// sink, the guarantee is per node only: another node may call OnError a second time.
type DeadLetterSink interface {
	// DeadLetter stores one dropped batch or returns an error; for a batch (queue and
	// non-empty batch id) it already holds as dead, it keeps the stored row as is and returns
	// an error wrapping ErrAlreadyDeadLettered.
	DeadLetter(ctx context.Context, dl *DeadLetter) error
}

// DeadLetter is a batch that core gave up on.
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
	// At is when core gave up.
	At time.Time
}
