package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// The size settings' special values (txmq.NoSizeLimit, txmq.DefaultMaxMessageBytes,
// txmq.DefaultMaxBatchBytes).
const (
	// NoSizeLimit turns the library's size limit off.
	NoSizeLimit = -1
	// DefaultMaxMessageBytes is the default largest encoded message: 1 MiB.
	DefaultMaxMessageBytes = 1 << 20
	// DefaultMaxBatchBytes is the default soft size limit of an encoded batch: 8 MiB.
	DefaultMaxBatchBytes = 8 << 20
)

// envelopeFixed bounds an encoded envelope's size beyond its messages, queue name and trace
// context: the version, batch id, attempt, created and due times and the JSON punctuation.
const envelopeFixed = 256

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

// sizeLimits are the effective limits of one publish call.
type sizeLimits struct {
	message, batch int    // bytes; 0 means none
	messageFrom    string // the setting that sets the message limit
	native         int    // the backend's own batch limit, when it sets the message limit
	backend        core.Backend
}

// limits returns the effective size limits of spec on this node for a batch carrying trace.
// It is on the publish path: it allocates nothing.
func (n *Engine) limits(spec *Spec, trace map[string]string) sizeLimits {
	l := sizeLimits{backend: n.backend}
	switch {
	case spec.MaxMessageBytes > 0:
		l.message, l.messageFrom = spec.MaxMessageBytes, "QueueConfig.MaxMessageBytes"
	case spec.MaxMessageBytes == 0 && n.opts.MaxMessageBytes > 0:
		l.message, l.messageFrom = n.opts.MaxMessageBytes, "NodeOptions.MaxMessageBytes"
	}
	switch {
	case spec.MaxBatchBytes > 0:
		l.batch = spec.MaxBatchBytes
	case spec.MaxBatchBytes == 0 && n.opts.MaxBatchBytes > 0:
		l.batch = n.opts.MaxBatchBytes
	}
	overhead := envelopeOverhead(spec.Name, trace) + perMessageOverhead
	if l.batch > 0 && l.message > 0 && l.batch < l.message+overhead {
		l.batch = l.message + overhead // a batch always carries one message of the largest size
	}
	if sl, ok := n.backend.(core.SizeLimiter); ok {
		if native := sl.MaxBatchBytes(); native > 0 {
			if l.batch == 0 || native < l.batch {
				l.batch = native
			}
			if m := native - overhead; l.message == 0 || m < l.message {
				l.message, l.native = max(m, 1), native
			}
		}
	}
	return l
}

// checkSizes refuses p when one of its messages (its JSON and its headers) is over the message
// limit.
func (l sizeLimits) checkSizes(p *core.Pending) error {
	if l.message <= 0 {
		return nil
	}
	for i, m := range p.Messages {
		size := len(m.Body) + envelope.HeadersSize(m.Headers) // headers count with their message
		if size <= l.message {
			continue
		}
		how := "raise " + l.messageFrom + " (NoSizeLimit turns the library limit off)"
		if l.native > 0 {
			how = fmt.Sprintf("the limit is the backend's own (%T stores batches of at most %d bytes); raise the server's limit", l.backend, l.native)
		}
		return fmt.Errorf("%w (%w): queue %q, message %d: %d bytes of JSON over the %d-byte limit; nothing of this call was published: %s, or store the payload elsewhere and publish its key",
			core.ErrRejected, core.ErrInvalidPayload, p.Queue, i, size, l.message, how)
	}
	return nil
}

// rejected dead-letters a batch the backend refused permanently at flush time (reason
// "rejected"), or, without a dead-letter sink, drops it; either way it is logged and counted.
// Handing it to the outbox would only make the sweep retry it forever.
func (n *Engine) rejected(ctx context.Context, b core.OutgoingBatch, cause error) {
	n.dropped(b.Queue, core.ReasonRejected, b.Messages, "txmq: the backend refused a batch permanently; not retried", "batch", b.ID, "error", cause,
		"dead_lettered", n.opts.DeadLetters != nil)
	sink := n.opts.DeadLetters
	if sink == nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.opts.ClaimTimeout)
	defer cancel()
	err := safeCall("dead-letter sink", func() error {
		return sink.DeadLetter(dctx, &core.DeadLetter{Queue: b.Queue, BatchID: b.ID, Body: b.Body, Reason: core.ReasonRejected,
			Error: errText(cause), Messages: b.Messages, Exclusive: b.Exclusive, At: time.Now()})
	})
	if err != nil {
		n.dropped(b.Queue, core.ReasonDeadLetterFailed, b.Messages, "txmq: dead-letter sink failed; rejected batch dropped without a dead letter", "batch", b.ID, "error", err)
	}
}
