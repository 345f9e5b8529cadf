package txmq

import (
	"context"
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
	// StartRun is called before each listener run, with the batch's stored trace context (that
	// of the first publish call in the batch); it returns the listener's ctx and a func that the
	// node calls with the run's error (nil on success) when the run ends.
	StartRun(ctx context.Context, queue, batchID string, messages, run int, trace map[string]string) (context.Context, func(err error))
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
func (n *Node) startRunSpan(ctx context.Context, queue, batchID string, messages, run int, trace map[string]string) (out context.Context, end func(error)) {
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("txmq: NodeOptions.Tracer.StartRun panicked; running the listener without a span", "queue", queue, "batch", batchID, "panic", r)
			out, end = ctx, func(error) {}
		}
	}()
	out, rawEnd := n.opts.Tracer.StartRun(ctx, queue, batchID, messages, run, trace)
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
