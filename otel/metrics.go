package otel

import (
	"context"
	"fmt"
	"time"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/metricset"
	"github.com/txmq/txmq/outbox"
)

// Metrics are opt-in: nothing is measured unless NewMetricHooks' hooks are given to a node or
// RegisterQueueGauges is called. They are the instruments of package prometheus, with the same
// names, meaning and labels (as attributes), so that dashboards and alerts carry over; both
// packages take them from one internal definition and one mapping of the node's hooks.

// meter returns the meter of provider p (nil: the global provider).
func meter(p metric.MeterProvider) metric.Meter {
	if p == nil {
		p = otelapi.GetMeterProvider()
	}
	return p.Meter(instrumentation)
}

// NewMetricHooks creates the counters and the run-time histogram on provider (nil: the global
// one, otel.GetMeterProvider) and returns hooks for txmq.NodeOptions.Hooks that update them:
//
//	txmq_batches_published_total{queue}         batches stored in the backend
//	txmq_messages_published_total{queue}        messages in them
//	txmq_runs_total{queue,outcome}              listener runs, outcome "success" or "failure"
//	txmq_run_duration_seconds{queue}            listener run time (histogram, unit s)
//	txmq_batches_retried_total{queue}           failed batches scheduled for another run
//	txmq_batches_dropped_total{queue,reason}    dropped batches, reason as in core's Reason constants
//	txmq_batches_handed_off_total{queue}        buffered batches the backend refused, moved to the outbox
//	txmq_runs_timed_out_total{queue,step}       runs past their RunTimeout, step "cancelled" or "stuck"
func NewMetricHooks(provider metric.MeterProvider) (*txmq.Hooks, error) {
	m := meter(provider)
	s := &meterSink{}
	for c, d := range metricset.Counters {
		ctr, err := m.Int64Counter(d.Name, metric.WithDescription(d.Help), metric.WithUnit(d.Unit))
		if err != nil {
			return nil, fmt.Errorf("txmq otel: creating counter %s: %w", d.Name, err)
		}
		s.counters[c] = ctr
	}
	d := metricset.RunDuration
	h, err := m.Float64Histogram(d.Name, metric.WithDescription(d.Help), metric.WithUnit(d.Unit),
		metric.WithExplicitBucketBoundaries(metricset.RunDurationBuckets...))
	if err != nil {
		return nil, fmt.Errorf("txmq otel: creating histogram %s: %w", d.Name, err)
	}
	s.runs = h
	return metricset.Hooks(s), nil
}

// meterSink is the OpenTelemetry instruments as the shared hook metrics' Sink.
type meterSink struct {
	counters [len(metricset.Counters)]metric.Int64Counter
	runs     metric.Float64Histogram
}

// attrs returns the attributes of labels, named as d's labels.
func attrs(d metricset.Def, labels []string) metric.MeasurementOption {
	kv := make([]attribute.KeyValue, min(len(d.Labels), len(labels)))
	for i := range kv {
		kv[i] = attribute.String(d.Labels[i], labels[i])
	}
	return metric.WithAttributes(kv...)
}

// Add implements metricset.Sink.
func (s *meterSink) Add(c metricset.Counter, v float64, labels ...string) {
	if int(c) < 0 || int(c) >= len(s.counters) {
		return
	}
	s.counters[c].Add(context.Background(), int64(v), attrs(metricset.Counters[c], labels))
}

// ObserveRun implements metricset.Sink.
func (s *meterSink) ObserveRun(queue string, seconds float64) {
	s.runs.Record(context.Background(), seconds, attrs(metricset.RunDuration, []string{queue}))
}

// AppDB is what the queue gauges read from the app database: the outbox's backlog and the
// dead-letter counts. *outbox.Store implements it.
type AppDB interface {
	// Backlog returns the outbox rows waiting, by queue.
	Backlog(ctx context.Context) (map[string]outbox.Backlog, error)
	// DeadLetterCounts returns the dead batches (not replayed), by queue.
	DeadLetterCounts(ctx context.Context) (map[string]int64, error)
}

// GaugeOptions configures RegisterQueueGauges; nil means every default.
type GaugeOptions struct {
	// Provider makes the instruments. Default the global one (otel.GetMeterProvider).
	Provider metric.MeterProvider
	// CacheFor is how long one reading serves collections: the backend and the app database
	// are asked at most once per CacheFor, however often the metrics are collected. Default 10 s.
	CacheFor time.Duration
	// Timeout bounds one reading. Default 5 s. A reading that fails or times out keeps the last
	// good values and counts an error (txmq_queue_gauge_errors_total).
	Timeout time.Duration
	// DB adds the outbox backlog and dead letters (an *outbox.Store, e.g. App.Store); nil
	// leaves those gauges out.
	DB AppDB
}

// RegisterQueueGauges registers observable gauges of the depths of every queue declared in
// node's registry, read when the metrics are collected, at most once per GaugeOptions.CacheFor:
// the gauges of package prometheus's NewQueueCollector, with the same names and meaning
// (txmq_queue_ready_batches, txmq_queue_in_flight_batches, txmq_queue_delayed_batches,
// txmq_queue_oldest_ready_age_seconds, and with DB txmq_queue_dead_batches,
// txmq_outbox_backlog_batches and txmq_outbox_oldest_age_seconds, all with the attribute
// queue; txmq_queue_gauge_errors_total counts failed readings). One registration per process
// is enough, since the depths are the backend's, not the node's; Unregister stops it.
func RegisterQueueGauges(node *txmq.Node, opts *GaugeOptions) (metric.Registration, error) {
	var o GaugeOptions
	if opts != nil {
		o = *opts
	}
	m := meter(o.Provider)
	r := metricset.NewReader(node, o.DB, o.CacheFor, o.Timeout, "txmq otel")
	var gauges [len(metricset.Gauges)]metric.Float64ObservableGauge
	observables := make([]metric.Observable, 0, len(gauges)+1)
	for g, d := range metricset.Gauges {
		gauge, err := m.Float64ObservableGauge(d.Name, metric.WithDescription(d.Help), metric.WithUnit(d.Unit))
		if err != nil {
			return nil, fmt.Errorf("txmq otel: creating gauge %s: %w", d.Name, err)
		}
		gauges[g] = gauge
		observables = append(observables, gauge)
	}
	d := metricset.GaugeErrors
	errs, err := m.Int64ObservableCounter(d.Name, metric.WithDescription(d.Help), metric.WithUnit(d.Unit))
	if err != nil {
		return nil, fmt.Errorf("txmq otel: creating counter %s: %w", d.Name, err)
	}
	observables = append(observables, errs)
	reg, err := m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		r.Each(func(g metricset.Gauge, v float64, queue string) {
			ob.ObserveFloat64(gauges[g], v, metric.WithAttributes(attribute.String("queue", queue)))
		})
		ob.ObserveInt64(errs, r.Errors())
		return nil
	}, observables...)
	if err != nil {
		return nil, fmt.Errorf("txmq otel: registering the queue gauges: %w", err)
	}
	return reg, nil
}
