package otel

import (
	"context"
	"strconv"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/txmq/txmq"
)

// instrumentation is the tracer's instrumentation scope name.
const instrumentation = "github.com/txmq/txmq/otel"

// Attribute keys of the OpenTelemetry messaging semantic conventions that the spans carry.
const (
	attrSystem       = "messaging.system"
	attrDestination  = "messaging.destination.name"
	attrOperation    = "messaging.operation.type"
	attrOperationN   = "messaging.operation.name"
	attrMessageCount = "messaging.batch.message_count"
	attrBatchID      = "messaging.message.conversation_id"
	attrRun          = "txmq.run"
)

// TracerOptions configures NewTracer; nil means every default.
type TracerOptions struct {
	// Provider makes the spans. Default the global one (otel.GetTracerProvider) at each span.
	Provider trace.TracerProvider
	// Propagator writes and reads the trace context stored in batches. Default the global one
	// (otel.GetTextMapPropagator) at each call.
	Propagator propagation.TextMapPropagator
}

// Tracer is a txmq.Tracer that makes OpenTelemetry spans named as the messaging semantic
// conventions say: "send <queue>" (kind producer) for each publish call, whose context travels
// with the batch, and "process <queue>" (kind consumer) for each listener run, the child of the
// batch's stored context (the first publish call in the batch: a batch coalesces several calls
// and carries one trace context), with the run number, the batch id and the message count. A
// failed run records its error and an error status.
type Tracer struct {
	o TracerOptions
}

var _ txmq.Tracer = (*Tracer)(nil)

// NewTracer returns a Tracer.
func NewTracer(opts *TracerOptions) *Tracer {
	t := &Tracer{}
	if opts != nil {
		t.o = *opts
	}
	return t
}

func (t *Tracer) tracer() trace.Tracer {
	p := t.o.Provider
	if p == nil {
		p = otelapi.GetTracerProvider()
	}
	return p.Tracer(instrumentation)
}

func (t *Tracer) propagator() propagation.TextMapPropagator {
	if t.o.Propagator != nil {
		return t.o.Propagator
	}
	return otelapi.GetTextMapPropagator()
}

// messaging returns the messaging attributes every span carries.
func messaging(operation, queue string, messages int) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String(attrSystem, "txmq"),
		attribute.String(attrDestination, queue),
		attribute.String(attrOperation, operation),
		attribute.String(attrOperationN, operation),
		attribute.Int(attrMessageCount, messages),
	}
}

// StartPublish implements txmq.Tracer: a producer span for the call, ended at once, whose
// context is returned to travel with the messages.
func (t *Tracer) StartPublish(ctx context.Context, queue string, messages int) map[string]string {
	ctx, span := t.tracer().Start(ctx, "send "+queue, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(messaging("send", queue, messages)...))
	defer span.End()
	carrier := propagation.MapCarrier{}
	t.propagator().Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	return carrier
}

// StartRun implements txmq.Tracer: a consumer span for the run, the child of the batch's stored
// trace context, ended with the run's outcome.
func (t *Tracer) StartRun(ctx context.Context, queue, batchID string, messages, run int, stored map[string]string) (context.Context, func(error)) {
	if len(stored) > 0 {
		ctx = t.propagator().Extract(ctx, propagation.MapCarrier(stored))
	}
	ctx, span := t.tracer().Start(ctx, "process "+queue, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(append(messaging("process", queue, messages),
			attribute.String(attrBatchID, batchID),
			attribute.String(attrRun, strconv.Itoa(run)))...))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
