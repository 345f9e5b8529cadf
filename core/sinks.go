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
type DeadLetterSink interface {
	// DeadLetter stores one dropped batch or returns an error.
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
