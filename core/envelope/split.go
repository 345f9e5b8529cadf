// Package envelope holds the one thing an adapter may do with a batch's encoded body (the
// envelope that core.OutgoingBatch.Body carries) besides storing it and handing it back: split
// it in two when the backend cannot store it whole. Everything else about the envelope is the
// engine's: adapters never decode it.
//
// The split is here, beside the engine's codec, rather than precomputed in core.OutgoingBatch:
// every producer of a batch (the publish buffer, the outbox relay and sweep, a dead-letter
// replay, a drain, ledger mode, hand-built batches in tests) then gets it without filling a
// field, nothing is spent on the rare batch too large for its backend until an adapter finds
// one, and the adapter still sees batches only, never the envelope
// (TestAdaptersNeverDecodeTheEnvelope checks that no adapter imports the codec).
//
// It is part of the txmq module's API for adapter modules, as core is, so that an adapter
// module and the txmq module can be versioned apart.
//
// Operator tools in modules of their own (the txmq command) read a stored batch through
// Messages and republish a dead letter through ForReplay; adapters use Split only
// (TestAdaptersNeverDecodeTheEnvelope checks that too).
package envelope

import (
	"github.com/txmq/txmq/core"
	inner "github.com/txmq/txmq/internal/envelope"
)

// Split cuts b into two batches of about half its messages each, for an adapter that cannot
// store b whole (a message size limit) and has nowhere else to put it: the adapter publishes
// each part as a batch of its own (a batch is only a unit of delivery, so its messages may
// travel apart), splitting a part again if it is still too large.
//
// Each part keeps b's Queue, Delay, NotBefore, Exclusive, Key and DedupWindow, and in its Body
// the attempt count, the queue's dedup window and its messages' ids and trace contexts. It
// gets a new batch id (ID, also inside its Body), its own Messages count, MessageIDs and
// DedupIDs (those of its messages, where b has them), and an empty PublishID: its new id is its
// publish identity, and a PublishID shared by two parts would make a deduplicating backend
// (SQS FIFO) drop the second.
//
// A batch of one message cannot be split: the error wraps core.ErrRejected and
// core.ErrInvalidPayload. A Body that is not an envelope returns the decoder's error.
func Split(b core.OutgoingBatch) ([]core.OutgoingBatch, error) {
	bodies, err := inner.Split(b.Body)
	if err != nil {
		return nil, err
	}
	parts := make([]core.OutgoingBatch, 0, len(bodies))
	for _, body := range bodies {
		env, err := inner.Decode(body)
		if err != nil {
			return nil, err
		}
		p := b
		p.ID, p.Body, p.Messages, p.PublishID = env.ID, body, len(env.Messages), ""
		if b.MessageIDs != nil {
			p.MessageIDs = env.MessageIDs
		}
		if b.DedupIDs != nil {
			p.DedupIDs = env.MessageIDs
		}
		parts = append(parts, p)
	}
	return parts, nil
}
