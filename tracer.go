package txmq

import (
	"context"

	"github.com/txmq/txmq/internal/envelope"
)

// Tracer starts spans around publish calls and listener runs. Package otel implements it with
// OpenTelemetry (a producer span per publish call, a consumer span per run, with the messaging
// semantic conventions). When NodeOptions.Tracer is set, InjectTrace and ExtractTrace are not
// used. A Tracer that panics is logged and ignored: the publish or run goes on without it.
type Tracer interface {
	// StartPublish is called once per publish call, with the caller's ctx, before anything is
	// stored; it returns the trace context to store with the call's messages (nil for none) and
	// ends its own span.
	StartPublish(ctx context.Context, queue string, messages int) map[string]string
	// StartRun is called before each listener run, with the trace context of the batch's first
	// message (that of the first publish call in the batch, the natural parent) and the trace
	// contexts of all its messages, each distinct one once with its message count (a batch
	// coalesces several publish calls: these are what span links point to); it returns the
	// listener's ctx and a func that the node calls with the run's error (nil on success) when
	// the run ends.
	StartRun(ctx context.Context, queue, batchID string, messages, run int, trace map[string]string, links []TraceLink) (context.Context, func(err error))
}

// TraceLink is a trace context that some messages of a batch were published with.
type TraceLink struct {
	// Trace is the stored context, as StartPublish (or NodeOptions.InjectTrace) returned it.
	Trace map[string]string
	// Messages is how many of the batch's messages were published with it.
	Messages int
}

// tracerBridge is a Tracer as the tracing feature calls it (its Tracer).
type tracerBridge struct{ t Tracer }

func (b tracerBridge) StartPublish(ctx context.Context, queue string, messages int) map[string]string {
	return b.t.StartPublish(ctx, queue, messages)
}

func (b tracerBridge) StartRun(ctx context.Context, queue, batchID string, messages, run int, trace map[string]string, counts []envelope.TraceCount) (context.Context, func(err error)) {
	var links []TraceLink
	if len(counts) > 0 {
		links = make([]TraceLink, len(counts))
		for i, c := range counts {
			links[i] = TraceLink{Trace: c.Trace, Messages: c.Messages}
		}
	}
	return b.t.StartRun(ctx, queue, batchID, messages, run, trace, links)
}
