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

// links returns the distinct trace contexts of the batch's messages, in order of first
// appearance, with their message counts; messages published without one are left out.
func (d *decoded) links() []TraceLink {
	counts := envelope.TraceCounts(d.Trace, d.Traces, d.TraceOf, d.count)
	if len(counts) == 0 {
		return nil
	}
	out := make([]TraceLink, len(counts))
	for i, c := range counts {
		out[i] = TraceLink{Trace: c.Trace, Messages: c.Messages}
	}
	return out
}

// startPublishSpan is Tracer.StartPublish guarded against panics.
func (n *Node) startPublishSpan(ctx context.Context, queue string, messages int) (trace map[string]string) {
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("txmq: NodeOptions.Tracer.StartPublish panicked; publishing without a trace context", "queue", queue, "panic", r)
			trace = nil
		}
	}()
	return n.opts.Tracer.StartPublish(ctx, queue, messages)
}

// startRunSpan is Tracer.StartRun guarded against panics; the end func it returns is guarded too.
func (n *Node) startRunSpan(ctx context.Context, queue, batchID string, messages, run int, trace map[string]string, links []TraceLink) (out context.Context, end func(error)) {
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("txmq: NodeOptions.Tracer.StartRun panicked; running the listener without a span", "queue", queue, "batch", batchID, "panic", r)
			out, end = ctx, func(error) {}
		}
	}()
	out, rawEnd := n.opts.Tracer.StartRun(ctx, queue, batchID, messages, run, trace, links)
	if out == nil {
		out = ctx
	}
	return out, func(err error) {
		defer func() {
			if r := recover(); r != nil {
				n.log.Error("txmq: the end func of NodeOptions.Tracer.StartRun panicked", "queue", queue, "batch", batchID, "panic", r)
			}
		}()
		if rawEnd != nil {
			rawEnd(err)
		}
	}
}
