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
	attrLinkMessages = "txmq.link.message_count"
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
// with the batch, and "process <queue>" (kind consumer) for each listener run, with the run
// number, the batch id and the message count. A batch coalesces the messages of several publish
// calls, each from its own trace: the consumer span is the child of the first message's
// producer span and carries a span link to the producer span of every message (one link per
// distinct producer span, its attribute txmq.link.message_count the number of the batch's
// messages it published), as the messaging conventions say for batch consumers. A failed run
// records its error and an error status.
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

// StartRun implements txmq.Tracer: a consumer span for the run, the child of the first
// message's stored trace context, linked to every message's, ended with the run's outcome.
func (t *Tracer) StartRun(ctx context.Context, queue, batchID string, messages, run int, stored map[string]string, links []txmq.TraceLink) (context.Context, func(error)) {
	prop := t.propagator()
	if len(stored) > 0 {
		ctx = prop.Extract(ctx, propagation.MapCarrier(stored))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(append(messaging("process", queue, messages),
			attribute.String(attrBatchID, batchID),
			attribute.String(attrRun, strconv.Itoa(run)))...)}
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(spanLinks(prop, links)...))
	}
	ctx, span := t.tracer().Start(ctx, "process "+queue, opts...)
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// spanLinks returns a span link per stored trace context that holds a valid span context.
func spanLinks(prop propagation.TextMapPropagator, links []txmq.TraceLink) []trace.Link {
	out := make([]trace.Link, 0, len(links))
	for _, l := range links {
		sc := trace.SpanContextFromContext(prop.Extract(context.Background(), propagation.MapCarrier(l.Trace)))
		if !sc.IsValid() {
			continue
		}
		out = append(out, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.Int(attrLinkMessages, l.Messages)}})
	}
	return out
}
