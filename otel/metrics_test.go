package otel_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	txmqotel "github.com/txmq/txmq/otel"
	"github.com/txmq/txmq/outbox"
	txmqprom "github.com/txmq/txmq/prometheus"
)

// series names a sample as "name{k=v,...}" (keys sorted), for both exporters.
func series(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + labels[k]
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// otelSamples collects r: counters and gauges by value, histograms as _count and _sum.
func otelSamples(t *testing.T, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	labels := func(s attribute.Set) map[string]string {
		m := map[string]string{}
		for _, kv := range s.ToSlice() {
			m[string(kv.Key)] = kv.Value.AsString()
		}
		return m
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[series(m.Name, labels(p.Attributes))] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[series(m.Name, labels(p.Attributes))] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[series(m.Name+"_count", labels(p.Attributes))] = float64(p.Count)
					out[series(m.Name+"_sum", labels(p.Attributes))] = p.Sum
				}
			default:
				t.Fatalf("metric %s of unexpected type %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// promSamples gathers reg with the same naming as otelSamples.
func promSamples(t *testing.T, reg *promclient.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				out[series(mf.GetName(), labels)] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[series(mf.GetName(), labels)] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[series(mf.GetName()+"_count", labels)] = float64(m.GetHistogram().GetSampleCount())
				out[series(mf.GetName()+"_sum", labels)] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// sameSamples fails t unless both exporters report the same series with the same values.
func sameSamples(t *testing.T, otel, prom map[string]float64) {
	t.Helper()
	for k, v := range prom {
		if o, ok := otel[k]; !ok || math.Abs(o-v) > 1e-9*max(1, math.Abs(v)) {
			t.Errorf("%s: prometheus %v, otel %v (reported %v)", k, v, o, ok)
		}
	}
	for k, v := range otel {
		if _, ok := prom[k]; !ok {
			t.Errorf("%s: otel %v, not reported by prometheus", k, v)
		}
	}
}

// both returns hooks that call a's then b's.
func both(a, b *txmq.Hooks) *txmq.Hooks {
	return &txmq.Hooks{
		Published: func(q string, m int) { a.Published(q, m); b.Published(q, m) },
		Delivered: func(q string, m, r int, took time.Duration, err error) {
			a.Delivered(q, m, r, took, err)
			b.Delivered(q, m, r, took, err)
		},
		Retried:   func(q string, r int, d time.Duration) { a.Retried(q, r, d); b.Retried(q, r, d) },
		Dropped:   func(q, reason string, m int) { a.Dropped(q, reason, m); b.Dropped(q, reason, m) },
		HandedOff: func(q string, m int) { a.HandedOff(q, m); b.HandedOff(q, m) },
		TimedOut:  func(q string, r int, stuck bool) { a.TimedOut(q, r, stuck); b.TimedOut(q, r, stuck) },
	}
}

// TestMetricHooksMirrorPrometheus: one node's events, counted by both packages' hooks, give the
// same series (names, labels) with the same values.
func TestMetricHooksMirrorPrometheus(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	otelHooks, err := txmqotel.NewMetricHooks(mp)
	if err != nil {
		t.Fatal(err)
	}
	reg := promclient.NewRegistry()
	promHooks, err := txmqprom.NewHooks(reg)
	if err != nil {
		t.Fatal(err)
	}

	qreg := txmq.NewRegistry()
	ok := txmq.MustDeclareIn(qreg, "ok", txmq.QueueConfig[int]{Transactional: txmq.Try})
	bad := txmq.MustDeclareIn(qreg, "bad", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxAttempts: 2})
	slow := txmq.MustDeclareIn(qreg, "slow", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxAttempts: 1, RunTimeout: 20 * time.Millisecond})
	be := memory.New(nil)
	defer be.Close()
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: qreg, Hooks: both(otelHooks, promHooks),
		Backoff: func(int) time.Duration { return time.Millisecond }, FlushWindow: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_ = ok.Listen(n, func(context.Context, []int) error { return nil })
	_ = bad.Listen(n, func(context.Context, []int) error { return errors.New("boom") })
	_ = slow.Listen(n, func(ctx context.Context, _ []int) error { <-ctx.Done(); return ctx.Err() })
	ctx := context.Background()
	_ = n.Start(ctx)
	_ = ok.PublishMany(ctx, n, []int{1, 2, 3})
	_ = bad.Publish(ctx, n, 1)
	_ = slow.Publish(ctx, n, 1)
	deadline := time.Now().Add(10 * time.Second)
	for n.Stats().Dropped[core.ReasonDeliveryExhausted] < 2 || n.Stats().Succeeded == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("runs did not finish: %+v", n.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = n.Close(ctx)

	got := otelSamples(t, reader)
	for k, want := range map[string]float64{
		"txmq_messages_published_total{queue=ok}":                         3,
		"txmq_batches_published_total{queue=bad}":                         1,
		"txmq_runs_total{outcome=failure,queue=bad}":                      2,
		"txmq_runs_total{outcome=success,queue=ok}":                       1,
		"txmq_batches_retried_total{queue=bad}":                           1,
		"txmq_batches_dropped_total{queue=bad,reason=delivery_exhausted}": 1,
		"txmq_run_duration_seconds_count{queue=bad}":                      2,
		"txmq_runs_timed_out_total{queue=slow,step=cancelled}":            1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	sameSamples(t, got, promSamples(t, reg))
}

// depthCounter counts Depths calls.
type depthCounter struct {
	core.Backend
	n atomic.Int64
}

func (d *depthCounter) Depths(ctx context.Context, queues []string) (map[string]core.Depth, error) {
	d.n.Add(1)
	return d.Backend.Depths(ctx, queues)
}

type gaugeDB struct{}

func (gaugeDB) Backlog(context.Context) (map[string]outbox.Backlog, error) {
	return map[string]outbox.Backlog{"gauged": {Rows: 4, OldestAge: 90 * time.Second}}, nil
}

func (gaugeDB) DeadLetterCounts(context.Context) (map[string]int64, error) {
	return map[string]int64{"gauged": 2}, nil
}

// TestQueueGaugesMirrorPrometheus: the OTel queue gauges report what the Prometheus collector
// reports for the same node, and collections within CacheFor ask the backend once.
func TestQueueGaugesMirrorPrometheus(t *testing.T) {
	t.Parallel()
	qreg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(qreg, "gauged", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxBatchMessages: 1})
	mem := memory.New(nil)
	defer mem.Close()
	be := &depthCounter{Backend: mem}
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: qreg, FlushWindow: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	for i := range 4 {
		var opts []txmq.PublishOption
		if i < 3 {
			opts = append(opts, txmq.After(time.Hour))
		}
		if err := q.Publish(context.Background(), n, i, opts...); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for n.Stats().PublishedBatches < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("published %d batches of 4", n.Stats().PublishedBatches)
		}
		time.Sleep(5 * time.Millisecond)
	}

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	r, err := txmqotel.RegisterQueueGauges(n, &txmqotel.GaugeOptions{Provider: mp, CacheFor: time.Hour, DB: gaugeDB{}})
	if err != nil {
		t.Fatal(err)
	}
	got := otelSamples(t, reader)
	for range 10 {
		otelSamples(t, reader)
	}
	if c := be.n.Load(); c != 1 {
		t.Fatalf("11 collections within CacheFor asked the backend %d times, want 1", c)
	}
	for k, want := range map[string]float64{
		"txmq_queue_ready_batches{queue=gauged}":       1,
		"txmq_queue_delayed_batches{queue=gauged}":     3,
		"txmq_queue_in_flight_batches{queue=gauged}":   0,
		"txmq_queue_dead_batches{queue=gauged}":        2,
		"txmq_outbox_backlog_batches{queue=gauged}":    4,
		"txmq_outbox_oldest_age_seconds{queue=gauged}": 90,
		"txmq_queue_gauge_errors_total{}":              0,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (reported %v), want %v", k, v, ok, want)
		}
	}

	reg := promclient.NewRegistry()
	reg.MustRegister(txmqprom.NewQueueCollector(n, &txmqprom.GaugeOptions{CacheFor: time.Hour, DB: gaugeDB{}}))
	prom := promSamples(t, reg)
	// The oldest-ready age grows between the two readings: compare that it is there.
	for k := range got {
		if strings.HasPrefix(k, "txmq_queue_oldest_ready_age_seconds") {
			if _, ok := prom[k]; !ok {
				t.Errorf("%s: otel only", k)
			}
			delete(got, k)
			delete(prom, k)
		}
	}
	sameSamples(t, got, prom)

	if err := r.Unregister(); err != nil {
		t.Fatal(err)
	}
	if after := otelSamples(t, reader); len(after) != 0 {
		t.Fatalf("after Unregister: %v", after)
	}
}
