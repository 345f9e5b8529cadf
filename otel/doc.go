// Package otel carries OpenTelemetry trace context through txmq batches: the publisher's span
// context is stored in the batch envelope, and the listener's context is its remote child, so
// spans a listener starts join the publisher's trace.
//
//	opts := &txmq.NodeOptions{}
//	otel.Configure(opts) // uses the global propagator (otelapi.GetTextMapPropagator)
//
// A batch coalesces the messages of several publish calls; it carries the trace context of each
// of its messages. With Tracer, the consumer span of a run is the child of the first message's
// producer span and links to every message's producer span. With Inject and Extract (the
// NodeOptions.InjectTrace and ExtractTrace funcs), the listener's ctx carries the first
// message's context.
//
// Metrics are opt-in and mirror package prometheus (same names, meaning and labels, from one
// shared definition): NewMetricHooks gives hooks for NodeOptions.Hooks that count what a node
// does, RegisterQueueGauges observes the per-queue depth gauges at collection time, cached.
//
//	hooks, err := otel.NewMetricHooks(nil) // the global MeterProvider
//	reg, err := otel.RegisterQueueGauges(app.Node, &otel.GaugeOptions{DB: app.Store})
//
// It is a module of its own (go get github.com/txmq/txmq/otel), so only apps that use it
// require OpenTelemetry. Its tests compare its metrics with package prometheus's, so its
// go.mod lists the prometheus module too (an app that imports only otel builds none of it).
package otel
