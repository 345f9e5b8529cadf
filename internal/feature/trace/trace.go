// Package trace is the tracing feature (NodeOptions.Tracer, InjectTrace, ExtractTrace): an
// engine.Tracing that asks the app's Tracer (package otel's) for a trace context at each
// publish call and for a span around each run, or, without a Tracer, carries the trace
// context with the InjectTrace and ExtractTrace funcs. The app's code is guarded: a Tracer
// that panics is logged and the publish or run goes on without it.
package trace

import (
	"context"

	"github.com/txmq/txmq/internal/engine"
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

// Tracing is the engine.Tracing of a Tracer, or of the inject and extract funcs.
type Tracing struct {
	tracer  Tracer
	inject  func(ctx context.Context) map[string]string
	extract func(ctx context.Context, trace map[string]string) context.Context
	e       *engine.Engine
}

// New returns the tracing of tracer, which supersedes inject and extract when set; nil when
// all three are nil (no tracing).
func New(tracer Tracer, inject func(ctx context.Context) map[string]string, extract func(ctx context.Context, trace map[string]string) context.Context) *Tracing {
	if tracer == nil && inject == nil && extract == nil {
		return nil
	}
	return &Tracing{tracer: tracer, inject: inject, extract: extract}
}

// Attach implements engine.Attacher.
func (t *Tracing) Attach(e *engine.Engine) { t.e = e }

// TracePublish returns the trace context of a publish call (engine.Tracing).
func (t *Tracing) TracePublish(ctx context.Context, queue string, messages int) map[string]string {
	switch {
	case t.tracer != nil:
		return t.startPublishSpan(ctx, queue, messages)
	case t.inject != nil:
		return t.inject(ctx)
	}
	return nil
}

// TraceRun returns the listener's ctx for run number run of b, and the func that ends its
// span (nil: none) (engine.Tracing).
func (t *Tracing) TraceRun(ctx context.Context, queue string, run int, b *engine.Batch) (context.Context, func(error)) {
	switch {
	case t.tracer != nil:
		return t.startRunSpan(ctx, queue, b.ID, b.Count, run, b.Trace, b.Links())
	case t.extract != nil && len(b.Trace) > 0:
		return t.withTrace(ctx, b.Trace), nil
	}
	return ctx, nil
}

// withTrace returns ctx carrying the batch's trace context; if the extract func panics the
// listener runs without it.
func (t *Tracing) withTrace(ctx context.Context, trace map[string]string) (out context.Context) {
	defer func() {
		if r := recover(); r != nil {
			t.e.Logger().Error("txmq: NodeOptions.ExtractTrace panicked; running the listener without the trace context", "panic", r)
			out = ctx
		}
	}()
	if out = t.extract(ctx, trace); out == nil {
		out = ctx
	}
	return out
}

// startPublishSpan is Tracer.StartPublish guarded against panics.
func (t *Tracing) startPublishSpan(ctx context.Context, queue string, messages int) (trace map[string]string) {
	defer func() {
		if r := recover(); r != nil {
			t.e.Logger().Error("txmq: NodeOptions.Tracer.StartPublish panicked; publishing without a trace context", "queue", queue, "panic", r)
			trace = nil
		}
	}()
	return t.tracer.StartPublish(ctx, queue, messages)
}

// startRunSpan is Tracer.StartRun guarded against panics; the end func it returns is guarded too.
func (t *Tracing) startRunSpan(ctx context.Context, queue, batchID string, messages, run int, trace map[string]string, links []envelope.TraceCount) (out context.Context, end func(error)) {
	defer func() {
		if r := recover(); r != nil {
			t.e.Logger().Error("txmq: NodeOptions.Tracer.StartRun panicked; running the listener without a span", "queue", queue, "batch", batchID, "panic", r)
			out, end = ctx, func(error) {}
		}
	}()
	out, rawEnd := t.tracer.StartRun(ctx, queue, batchID, messages, run, trace, links)
	if out == nil {
		out = ctx
	}
	return out, func(err error) {
		defer func() {
			if r := recover(); r != nil {
				t.e.Logger().Error("txmq: the end func of NodeOptions.Tracer.StartRun panicked", "queue", queue, "batch", batchID, "panic", r)
			}
		}()
		if rawEnd != nil {
			rawEnd(err)
		}
	}
}
