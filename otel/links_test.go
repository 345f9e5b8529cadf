package otel_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	txmqotel "github.com/txmq/txmq/otel"
)

// stagingTx is an app transaction that keeps what publishes stage, as the outbox does, so that
// the publishes of several traces land in one batch whatever the flush timing.
type stagingTx struct {
	mu     sync.Mutex
	staged []*core.Pending
}

func (tx *stagingTx) Stage(_ context.Context, p *core.Pending) error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.staged = append(tx.staged, p)
	return nil
}

func (tx *stagingTx) AfterCommit(func()) bool { return false }

// TestConsumerSpanLinksEveryProducer: a batch holding the messages of publish calls made in 3
// traces gets one consumer span, the child of the first message's producer span, with a link
// to each of the 3 producer spans that counts the messages it published.
func TestConsumerSpanLinksEveryProducer(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tracer := txmqotel.NewTracer(&txmqotel.TracerOptions{Provider: tp, Propagator: propagation.TraceContext{}})

	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "linked", txmq.QueueConfig[int]{Transactional: txmq.Try})
	be := memory.New(nil)
	defer be.Close()
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, FlushWindow: time.Millisecond, Tracer: tracer})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []int, 4)
	_ = q.Listen(n, func(_ context.Context, msgs []int) error {
		got <- msgs
		return nil
	})
	_ = n.Start(context.Background())
	defer n.Close(context.Background())

	// Three requests, each its own trace, publish in one transaction-like stage.
	tx := &stagingTx{}
	var traceIDs []trace.TraceID
	for _, msgs := range [][]int{{1}, {2, 3}, {4}} {
		ctx, span := tp.Tracer("app").Start(context.Background(), "request")
		if err := q.PublishMany(core.ContextWithTx(ctx, tx), n, msgs); err != nil {
			t.Fatal(err)
		}
		span.End()
		traceIDs = append(traceIDs, span.SpanContext().TraceID())
	}
	batches, err := core.Batches(tx.staged, time.Now())
	if err != nil || len(batches) != 1 {
		t.Fatalf("%d batches, %v: want the 3 publishes in one", len(batches), err)
	}
	if err := be.Publish(context.Background(), batches[0]); err != nil {
		t.Fatal(err)
	}
	select {
	case msgs := <-got:
		if !slices.Equal(msgs, []int{1, 2, 3, 4}) {
			t.Fatalf("listener got %v, want one batch 1 2 3 4", msgs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}

	producers := map[trace.TraceID]sdktrace.ReadOnlySpan{}
	var consumer sdktrace.ReadOnlySpan
	deadline := time.Now().Add(10 * time.Second)
	for consumer == nil && time.Now().Before(deadline) {
		for _, s := range rec.Ended() {
			switch s.SpanKind() {
			case trace.SpanKindProducer:
				producers[s.SpanContext().TraceID()] = s
			case trace.SpanKindConsumer:
				consumer = s
			}
		}
		if consumer == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if consumer == nil || len(producers) != 3 {
		t.Fatalf("consumer span %v, %d producer spans: want one and 3", consumer, len(producers))
	}
	if p := producers[traceIDs[0]]; consumer.Parent().SpanID() != p.SpanContext().SpanID() || consumer.SpanContext().TraceID() != traceIDs[0] {
		t.Fatalf("consumer span's parent %v, want the first message's producer span %v", consumer.Parent(), p.SpanContext())
	}
	links := consumer.Links()
	if len(links) != 3 {
		t.Fatalf("consumer span has %d links, want 3 (one per producer trace)", len(links))
	}
	for i, l := range links {
		p := producers[traceIDs[i]]
		if l.SpanContext.TraceID() != traceIDs[i] || l.SpanContext.SpanID() != p.SpanContext().SpanID() {
			t.Fatalf("link %d to %v, want producer span %v of trace %v", i, l.SpanContext, p.SpanContext(), traceIDs[i])
		}
		if want := []int64{1, 2, 1}[i]; len(l.Attributes) != 1 || l.Attributes[0].Value.AsInt64() != want {
			t.Fatalf("link %d attributes %v, want txmq.link.message_count %d", i, l.Attributes, want)
		}
	}
}
