package otel_test

import (
	"context"
	"testing"
	"time"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	txmqotel "github.com/txmq/txmq/otel"
)

func TestTraceContextCrossesTheBackend(t *testing.T) {
	otelapi.SetTextMapPropagator(propagation.TraceContext{})
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	pubCtx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))

	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "traced", txmq.QueueConfig[int]{Transactional: txmq.Try})
	be := memory.New(nil)
	defer be.Close()
	opts := &txmq.NodeOptions{Registry: reg, FlushWindow: time.Millisecond}
	txmqotel.Configure(opts)
	n, err := txmq.NewNode(be, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan trace.SpanContext, 1)
	_ = q.Listen(n, func(ctx context.Context, _ []int) error {
		got <- trace.SpanContextFromContext(ctx)
		return nil
	})
	_ = n.Start(context.Background())
	defer n.Close(context.Background())
	if err := q.Publish(pubCtx, n, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case sc := <-got:
		if sc.TraceID() != traceID || sc.SpanID() != spanID || !sc.IsRemote() {
			t.Fatalf("listener span context %v, want the publisher's as remote parent", sc)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
	if txmqotel.Inject(context.Background()) != nil {
		t.Fatal("Inject without a span must return nil")
	}
}
