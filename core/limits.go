package core

import (
	"context"
	"fmt"
	"time"
)

// NoSizeLimit, as a QueueConfig or NodeOptions size setting, turns the library's size limit off;
// the backend's own limit (SizeLimiter) still applies.
const NoSizeLimit = -1

// DefaultMaxMessageBytes is the default largest encoded (JSON) message a publish accepts: 1 MiB.
const DefaultMaxMessageBytes = 1 << 20

// DefaultMaxBatchBytes is the default soft size limit of an encoded batch: 8 MiB. Batches are cut
// to stay under it; a batch always holds at least one message.
const DefaultMaxBatchBytes = 8 << 20

// ReasonRejected: the backend refused a batch permanently (too large, invalid: an error wrapping
// ErrRejected). A refused buffered flush is dead-lettered (or dropped) at once rather than
// handed to the outbox, and an outbox row the backend refuses is dead-lettered by the outbox.
const ReasonRejected = "rejected"

// ReasonPublishExhausted: an outbox row kept failing to publish (with errors other than the
// backend being unavailable) until the outbox's own budget (outbox Options.MaxAttempts) was
// spent; the outbox dead-letters it.
const ReasonPublishExhausted = "publish_exhausted"

// SizeLimiter is implemented by adapters whose backend cannot store an encoded batch over a
// certain size whole (and does not split or chunk it). Nodes read it at every publish call, so
// an adapter may learn its limit from the server after opening.
type SizeLimiter interface {
	// MaxBatchBytes returns the largest encoded batch the backend stores, in bytes; 0 means no
	// limit of the adapter's own.
	MaxBatchBytes() int
}

// envelopeFixed bounds an encoded envelope's size beyond its messages, queue name and trace
// context: the version, batch id, attempt, created time and the JSON punctuation.
const envelopeFixed = 160

// perMessageOverhead bounds the bytes one message adds beyond its JSON: its id (26 characters)
// in the ids array, quotes and separators.
const perMessageOverhead = 40

// envelopeOverhead bounds the encoded size of a batch of queue with trace context trace, beyond
// its messages (see perMessageOverhead).
func envelopeOverhead(queue string, trace map[string]string) int {
	n := envelopeFixed + len(queue)
	for k, v := range trace {
		n += len(k) + len(v) + 8
	}
	return n
}

// sizeLimits are the effective limits of one publish call, with the settings they come from.
type sizeLimits struct {
	message, batch       int // bytes; 0 means none
	messageFrom, batchOf string
	messageNative        bool // the message limit is the backend's own
}

// limits returns the effective size limits of spec on this node for a batch carrying trace.
func (n *Node) limits(spec *queueSpec, trace map[string]string) sizeLimits {
	var l sizeLimits
	pick := func(queue, node int, queueName, nodeName string) (int, string) {
		switch {
		case queue > 0:
			return queue, queueName
		case queue < 0:
			return 0, ""
		case node > 0:
			return node, nodeName
		}
		return 0, ""
	}
	l.message, l.messageFrom = pick(spec.maxMessageBytes, n.opts.MaxMessageBytes, "QueueConfig.MaxMessageBytes", "NodeOptions.MaxMessageBytes")
	l.batch, l.batchOf = pick(spec.maxBatchBytes, n.opts.MaxBatchBytes, "QueueConfig.MaxBatchBytes", "NodeOptions.MaxBatchBytes")
	if l.batch > 0 && l.message > 0 && l.batch < l.message+envelopeOverhead(spec.name, trace)+perMessageOverhead {
		// A batch always carries one message of the largest size allowed.
		l.batch = l.message + envelopeOverhead(spec.name, trace) + perMessageOverhead
	}
	if sl, ok := n.backend.(SizeLimiter); ok {
		if native := sl.MaxBatchBytes(); native > 0 {
			from := fmt.Sprintf("the backend's own limit of %d bytes per batch (%T)", native, n.backend)
			if l.batch == 0 || native < l.batch {
				l.batch, l.batchOf = native, from
			}
			if m := native - envelopeOverhead(spec.name, trace) - perMessageOverhead; l.message == 0 || m < l.message {
				l.message, l.messageFrom, l.messageNative = max(m, 1), from, true
			}
		}
	}
	return l
}

// checkSizes refuses p when one of its messages is over the message limit.
func (l sizeLimits) checkSizes(p *Pending) error {
	if l.message <= 0 {
		return nil
	}
	for i, m := range p.Messages {
		if len(m.Body) > l.message {
			how := "raise " + l.messageFrom + " (NoSizeLimit turns the library limit off)"
			if l.messageNative {
				how = "the limit is " + l.messageFrom + "; raise the server's limit"
			}
			return fmt.Errorf("%w (%w): queue %q, message %d: %d bytes of JSON over the %d-byte limit; nothing of this call was published: %s, or store the payload elsewhere and publish its key",
				ErrRejected, ErrInvalidPayload, p.Queue, i, len(m.Body), l.message, how)
		}
	}
	return nil
}

// rejected dead-letters a batch the backend refused permanently at flush time (reason
// "rejected"), or, without a dead-letter sink, drops it; either way it is logged and counted.
// Handing it to the outbox would only make the sweep retry it forever.
func (n *Node) rejected(ctx context.Context, b OutgoingBatch, cause error) {
	n.dropped(b.Queue, ReasonRejected, b.Messages, "txmq: the backend refused a batch permanently; not retried", "batch", b.ID, "error", cause,
		"dead_lettered", n.opts.DeadLetters != nil)
	sink := n.opts.DeadLetters
	if sink == nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.opts.ClaimTimeout)
	defer cancel()
	err := safeCall("dead-letter sink", func() error {
		return sink.DeadLetter(dctx, &DeadLetter{Queue: b.Queue, BatchID: b.ID, Body: b.Body, Reason: ReasonRejected,
			Error: errText(cause), Messages: b.Messages, Exclusive: b.Exclusive, At: time.Now()})
	})
	if err != nil {
		n.dropped(b.Queue, ReasonDeadLetterFailed, b.Messages, "txmq: dead-letter sink failed; rejected batch dropped without a dead letter", "batch", b.ID, "error", err)
	}
}
