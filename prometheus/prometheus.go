package prometheus

import (
	"errors"
	"fmt"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"

	"github.com/txmq/txmq"
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
}

// NewMetrics creates the collectors and registers them with reg (nil: not registered).
// Registering twice with the same registerer reuses the collectors already there.
func NewMetrics(reg promclient.Registerer) (*Metrics, error) {
	m := &Metrics{
		BatchesPublished: promclient.NewCounterVec(promclient.CounterOpts{Name: "txmq_batches_published_total",
			Help: "Batches stored in the backend."}, []string{"queue"}),
		MessagesPublished: promclient.NewCounterVec(promclient.CounterOpts{Name: "txmq_messages_published_total",
			Help: "Messages stored in the backend."}, []string{"queue"}),
		Runs: promclient.NewCounterVec(promclient.CounterOpts{Name: "txmq_runs_total",
			Help: "Listener runs by outcome (success, failure)."}, []string{"queue", "outcome"}),
		RunDuration: promclient.NewHistogramVec(promclient.HistogramOpts{Name: "txmq_run_duration_seconds",
			Help: "Listener run time.", Buckets: promclient.ExponentialBuckets(0.001, 4, 10)}, []string{"queue"}),
		Retried: promclient.NewCounterVec(promclient.CounterOpts{Name: "txmq_batches_retried_total",
			Help: "Failed batches scheduled for another run."}, []string{"queue"}),
		Dropped: promclient.NewCounterVec(promclient.CounterOpts{Name: "txmq_batches_dropped_total",
			Help: "Dropped batches by reason (delivery_exhausted, worker_lost, undecodable, outbox_handoff_failed, rejected, ...)."}, []string{"queue", "reason"}),
		HandedOff: promclient.NewCounterVec(promclient.CounterOpts{Name: "txmq_batches_handed_off_total",
			Help: "Buffered batches the backend refused, handed to the outbox."}, []string{"queue"}),
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
	return &txmq.Hooks{
		Published: func(queue string, messages int) {
			m.BatchesPublished.WithLabelValues(queue).Inc()
			m.MessagesPublished.WithLabelValues(queue).Add(float64(messages))
		},
		Delivered: func(queue string, _ int, _ int, took time.Duration, err error) {
			outcome := "success"
			if err != nil {
				outcome = "failure"
			}
			m.Runs.WithLabelValues(queue, outcome).Inc()
			m.RunDuration.WithLabelValues(queue).Observe(took.Seconds())
		},
		Retried: func(queue string, _ int, _ time.Duration) { m.Retried.WithLabelValues(queue).Inc() },
		Dropped: func(queue, reason string, _ int) { m.Dropped.WithLabelValues(queue, reason).Inc() },
		HandedOff: func(queue string, _ int) {
			m.HandedOff.WithLabelValues(queue).Inc()
		},
	}
}

// NewHooks registers the metrics with reg and returns hooks for txmq.NodeOptions.Hooks.
func NewHooks(reg promclient.Registerer) (*txmq.Hooks, error) {
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	return m.Hooks(), nil
}
