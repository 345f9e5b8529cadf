package otel

import (
	"context"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/txmq/txmq"
)

// Inject returns the trace context of ctx as a string map for a batch envelope, or nil when ctx
// carries none.
func Inject(ctx context.Context) map[string]string {
	carrier := propagation.MapCarrier{}
	otelapi.GetTextMapPropagator().Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	return carrier
}

// Extract returns ctx carrying the remote span context stored in a batch envelope.
func Extract(ctx context.Context, trace map[string]string) context.Context {
	return otelapi.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(trace))
}

// Configure sets opts.Tracer to a Tracer on the global provider and propagator: spans for
// publish calls and listener runs, and the trace context carried through batches.
func Configure(opts *txmq.NodeOptions) {
	opts.Tracer = NewTracer(nil)
}
