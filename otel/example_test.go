package otel_test

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	txmqotel "github.com/txmq/txmq/otel"
)

// sumOf returns the int64 sum named name in rm (of its first data point).
func sumOf(rm metricdata.ResourceMetrics, name string) int64 {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name && len(s.DataPoints) > 0 {
				return s.DataPoints[0].Value
			}
		}
	}
	return -1
}

// waitFor polls cond for up to 10 s.
func waitFor(cond func() bool) {
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			panic("timed out")
		}
	}
}

// A node's counters through OpenTelemetry metrics: the same names as package prometheus.
func ExampleNewMetricHooks() {
	reader := sdkmetric.NewManualReader() // an app would use an exporter's reader
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	hooks, err := txmqotel.NewMetricHooks(provider) // nil: the global MeterProvider
	if err != nil {
		panic(err)
	}

	reg := txmq.NewRegistry()
	emails := txmq.MustDeclareIn(reg, "emails", txmq.QueueConfig[string]{Transactional: txmq.Try})
	be := memory.New(nil)
	defer be.Close()
	node, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Hooks: hooks, FlushWindow: time.Millisecond})
	if err != nil {
		panic(err)
	}
	_ = emails.Listen(node, func(context.Context, []string) error { return nil })
	_ = node.Start(context.Background())
	_ = emails.PublishMany(context.Background(), node, []string{"a@example.com", "b@example.com"})
	waitFor(func() bool { return node.Stats().Succeeded > 0 }) // counted after the run's hooks
	_ = node.Close(context.Background())

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	fmt.Println("txmq_messages_published_total", sumOf(rm, "txmq_messages_published_total"))
	fmt.Println("txmq_runs_total", sumOf(rm, "txmq_runs_total"))
	// Output:
	// txmq_messages_published_total 2
	// txmq_runs_total 1
}

// Per-queue depth gauges, read from the backend when the metrics are collected.
func ExampleRegisterQueueGauges() {
	reg := txmq.NewRegistry()
	reports := txmq.MustDeclareIn(reg, "reports", txmq.QueueConfig[int]{Transactional: txmq.Try})
	be := memory.New(nil)
	defer be.Close()
	node, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, FlushWindow: time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer node.Close(context.Background())
	_ = reports.Publish(context.Background(), node, 1, txmq.After(time.Hour))
	waitFor(func() bool { return node.Stats().PublishedBatches > 0 })

	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	// With DB: app.Store, the dead-letter and outbox gauges too.
	registration, err := txmqotel.RegisterQueueGauges(node, &txmqotel.GaugeOptions{Provider: provider})
	if err != nil {
		panic(err)
	}
	defer registration.Unregister()

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[float64]); ok && m.Name == "txmq_queue_delayed_batches" {
				queue, _ := g.DataPoints[0].Attributes.Value("queue")
				fmt.Println(m.Name, queue.AsString(), g.DataPoints[0].Value)
			}
		}
	}
	// Output:
	// txmq_queue_delayed_batches reports 1
}

// The consumer span of a batch whose messages were published in two traces links both
// producer spans.
func ExampleTracer_StartRun() {
	rec := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracer := txmqotel.NewTracer(&txmqotel.TracerOptions{Provider: provider, Propagator: propagation.TraceContext{}})

	// What two publish calls, each in its own request's trace, stored with their messages.
	var stored []map[string]string
	for range 2 {
		ctx, request := provider.Tracer("app").Start(context.Background(), "request")
		stored = append(stored, tracer.StartPublish(ctx, "emails", 1))
		request.End()
	}
	_, end := tracer.StartRun(context.Background(), "emails", "batch-1", 3, 1, stored[0],
		[]txmq.TraceLink{{Trace: stored[0], Messages: 1}, {Trace: stored[1], Messages: 2}})
	end(nil)

	for _, s := range rec.Ended() {
		if s.Name() == "process emails" {
			fmt.Println(s.Name(), "links", len(s.Links()), "traces:", s.Links()[0].SpanContext.TraceID() != s.Links()[1].SpanContext.TraceID())
		}
	}
	// Output:
	// process emails links 2 traces: true
}
