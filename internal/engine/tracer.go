package engine

import (
	"context"

	"github.com/txmq/txmq/internal/envelope"
)

// Tracer starts spans around publish calls and listener runs (txmq.Tracer, whose doc says
// what each call gets). StartRun gets the batch's trace contexts as counted by
// envelope.TraceCounts: the app API turns them into its TraceLinks.
type Tracer interface {
	// StartPublish returns the trace context to store with a publish call's messages.
	StartPublish(ctx context.Context, queue string, messages int) map[string]string
	// StartRun returns the listener's ctx and the func to call with the run's error.
	StartRun(ctx context.Context, queue, batchID string, messages, run int, trace map[string]string, links []envelope.TraceCount) (context.Context, func(err error))
}

// links returns the distinct trace contexts of the batch's messages with their counts.
func (d *Batch) links() []envelope.TraceCount {
	return envelope.TraceCounts(d.Trace, d.Traces, d.TraceOf, d.Count)
}

// startPublishSpan is Tracer.StartPublish guarded against panics.
func (n *Engine) startPublishSpan(ctx context.Context, queue string, messages int) (trace map[string]string) {
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("txmq: NodeOptions.Tracer.StartPublish panicked; publishing without a trace context", "queue", queue, "panic", r)
			trace = nil
		}
	}()
	return n.opts.Tracer.StartPublish(ctx, queue, messages)
}

// startRunSpan is Tracer.StartRun guarded against panics; the end func it returns is guarded too.
func (n *Engine) startRunSpan(ctx context.Context, queue, batchID string, messages, run int, trace map[string]string, links []envelope.TraceCount) (out context.Context, end func(error)) {
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
