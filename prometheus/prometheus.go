package prometheus

import (
	"errors"
	"fmt"

	promclient "github.com/prometheus/client_golang/prometheus"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/metricset"
)

// Metrics holds the collectors behind the hooks, for tests and custom registration.
type Metrics struct {
	// BatchesPublished counts batches stored in the backend, by queue.
	BatchesPublished *promclient.CounterVec
	// MessagesPublished counts messages stored in the backend, by queue.
	MessagesPublished *promclient.CounterVec
	// Runs counts listener runs by queue and outcome.
	Runs *promclient.CounterVec
	// RunDuration observes listener run time by queue.
	RunDuration *promclient.HistogramVec
	// Retried counts batches scheduled for another run, by queue.
	Retried *promclient.CounterVec
	// Dropped counts dropped batches by queue and reason.
	Dropped *promclient.CounterVec
	// HandedOff counts batches handed to the outbox, by queue.
	HandedOff *promclient.CounterVec
	// TimedOut counts runs past their RunTimeout by queue and step (cancelled, stuck).
	TimedOut *promclient.CounterVec
}

// NewMetrics creates the collectors and registers them with reg (nil: not registered).
// Registering twice with the same registerer reuses the collectors already there.
func NewMetrics(reg promclient.Registerer) (*Metrics, error) {
	counter := func(c metricset.Counter) *promclient.CounterVec {
		d := metricset.Counters[c]
		return promclient.NewCounterVec(promclient.CounterOpts{Name: d.Name, Help: d.Help}, d.Labels)
	}
	d := metricset.RunDuration
	m := &Metrics{
		BatchesPublished:  counter(metricset.BatchesPublished),
		MessagesPublished: counter(metricset.MessagesPublished),
		Runs:              counter(metricset.Runs),
		RunDuration: promclient.NewHistogramVec(promclient.HistogramOpts{Name: d.Name, Help: d.Help,
			Buckets: metricset.RunDurationBuckets}, d.Labels),
		Retried:   counter(metricset.Retried),
		Dropped:   counter(metricset.Dropped),
		HandedOff: counter(metricset.HandedOff),
		TimedOut:  counter(metricset.TimedOut),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.BatchesPublished, err = register(reg, m.BatchesPublished)
	if err == nil {
		m.MessagesPublished, err = register(reg, m.MessagesPublished)
	}
	if err == nil {
		m.Runs, err = register(reg, m.Runs)
	}
	if err == nil {
		m.RunDuration, err = register(reg, m.RunDuration)
	}
	if err == nil {
		m.Retried, err = register(reg, m.Retried)
	}
	if err == nil {
		m.Dropped, err = register(reg, m.Dropped)
	}
	if err == nil {
		m.HandedOff, err = register(reg, m.HandedOff)
	}
	if err == nil {
		m.TimedOut, err = register(reg, m.TimedOut)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the equal collector already registered (several nodes in
// one process share the metrics).
func register[C promclient.Collector](reg promclient.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are promclient.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("txmq: registering metrics: %w", err)
	}
	return c, nil
}

// Hooks returns core hooks that update m.
func (m *Metrics) Hooks() *txmq.Hooks {
	return metricset.Hooks(sink{m})
}

// sink is m as the shared hook metrics' Sink.
type sink struct{ m *Metrics }

// Add implements metricset.Sink.
func (s sink) Add(c metricset.Counter, v float64, labels ...string) {
	var vec *promclient.CounterVec
	switch c {
	case metricset.BatchesPublished:
		vec = s.m.BatchesPublished
	case metricset.MessagesPublished:
		vec = s.m.MessagesPublished
	case metricset.Runs:
		vec = s.m.Runs
	case metricset.Retried:
		vec = s.m.Retried
	case metricset.Dropped:
		vec = s.m.Dropped
	case metricset.HandedOff:
		vec = s.m.HandedOff
	case metricset.TimedOut:
		vec = s.m.TimedOut
	default:
		return
	}
	vec.WithLabelValues(labels...).Add(v)
}

// ObserveRun implements metricset.Sink.
func (s sink) ObserveRun(queue string, seconds float64) {
	s.m.RunDuration.WithLabelValues(queue).Observe(seconds)
}

// NewHooks registers the metrics with reg and returns hooks for txmq.NodeOptions.Hooks.
func NewHooks(reg promclient.Registerer) (*txmq.Hooks, error) {
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	return m.Hooks(), nil
}
