package otel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	txmqotel "github.com/txmq/txmq/otel"
)

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestSpans: a publish call makes a producer span, each run a consumer span that is its child,
// with the messaging attributes; a failed run has an error status and the retry a second span.
func TestSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tracer := txmqotel.NewTracer(&txmqotel.TracerOptions{Provider: tp, Propagator: propagation.TraceContext{}})

	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "spans", txmq.QueueConfig[int]{Transactional: txmq.Try})
	be := memory.New(nil)
	defer be.Close()
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, FlushWindow: time.Millisecond, Tracer: tracer,
		Backoff: func(int) time.Duration { return time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	runs := make(chan trace.SpanContext, 4)
	_ = q.Listen(n, func(ctx context.Context, _ []int) error {
		runs <- trace.SpanContextFromContext(ctx)
		if len(runs) == 1 {
			return errors.New("first run fails")
		}
		return nil
	})
	_ = n.Start(context.Background())
	defer n.Close(context.Background())
	ctx, parent := tp.Tracer("app").Start(context.Background(), "signup")
	if err := q.PublishMany(ctx, n, []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	parent.End()
	deadline := time.After(10 * time.Second)
	var consumer []sdktrace.ReadOnlySpan
	var producer sdktrace.ReadOnlySpan
	for len(consumer) < 2 {
		select {
		case <-deadline:
			t.Fatalf("spans recorded: %d consumer", len(consumer))
		case <-time.After(10 * time.Millisecond):
		}
		consumer = consumer[:0]
		for _, s := range rec.Ended() {
			switch s.SpanKind() {
			case trace.SpanKindProducer:
				producer = s
			case trace.SpanKindConsumer:
				consumer = append(consumer, s)
			}
		}
	}
	if producer == nil || producer.Name() != "send spans" || producer.Parent().SpanID() != parent.SpanContext().SpanID() ||
		attr(producer, "messaging.destination.name").AsString() != "spans" || attr(producer, "messaging.batch.message_count").AsInt64() != 2 {
		t.Fatalf("producer span %+v: want \"send spans\", child of the app's span, destination spans, 2 messages", producer)
	}
	for i, s := range consumer {
		if s.Name() != "process spans" || s.Parent().SpanID() != producer.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() ||
			attr(s, "messaging.system").AsString() != "txmq" || attr(s, "messaging.operation.type").AsString() != "process" {
			t.Fatalf("consumer span %d: %s parent %v: want \"process spans\", child of the producer span, in the app's trace", i, s.Name(), s.Parent())
		}
	}
	if consumer[0].Status().Code != codes.Error || consumer[1].Status().Code == codes.Error {
		t.Fatalf("run statuses %v, %v: want the failed first run an error, the second not", consumer[0].Status(), consumer[1].Status())
	}
	if attr(consumer[0], "txmq.run").AsString() != "1" || attr(consumer[1], "txmq.run").AsString() != "2" {
		t.Fatalf("runs %v, %v; want 1 and 2", attr(consumer[0], "txmq.run"), attr(consumer[1], "txmq.run"))
	}
	if sc := <-runs; sc.SpanID() != consumer[0].SpanContext().SpanID() {
		t.Fatalf("the listener's ctx carries span %v, want its run's consumer span %v", sc.SpanID(), consumer[0].SpanContext().SpanID())
	}
}
