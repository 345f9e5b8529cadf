// Package metricset is the one source of txmq's metrics for exporters (the prometheus and otel
// modules, or one of your own for another metrics library): their names, help, units and
// labels, the mapping of a node's txmq.Hooks to counter and histogram updates (Hooks), and the
// cached reading of the per-queue gauges (Reader). Each exporter only turns these into its own
// library's instruments, so that every exporter reports the same metrics under the same names.
// It imports no metrics library.
package metricset

import (
	"time"

	"github.com/txmq/txmq"
)

// Def describes one metric.
type Def struct {
	// Name is the metric name, as Prometheus spells it.
	Name string
	// Help is its description.
	Help string
	// Unit is its UCUM unit, for OpenTelemetry.
	Unit string
	// Labels are its label (attribute) names.
	Labels []string
}

// Counter identifies one of the hook counters.
type Counter int

// The hook counters.
const (
	BatchesPublished Counter = iota
	MessagesPublished
	Runs
	Retried
	Dropped
	HandedOff
	TimedOut
)

// Counters describes the hook counters, by Counter.
var Counters = [...]Def{
	BatchesPublished:  {"txmq_batches_published_total", "Batches stored in the backend.", "{batch}", []string{"queue"}},
	MessagesPublished: {"txmq_messages_published_total", "Messages stored in the backend.", "{message}", []string{"queue"}},
	Runs:              {"txmq_runs_total", "Listener runs by outcome (success, failure).", "{run}", []string{"queue", "outcome"}},
	Retried:           {"txmq_batches_retried_total", "Failed batches scheduled for another run.", "{batch}", []string{"queue"}},
	Dropped: {"txmq_batches_dropped_total", "Dropped batches by reason (delivery_exhausted, worker_lost, undecodable, outbox_handoff_failed, rejected, ...).",
		"{batch}", []string{"queue", "reason"}},
	HandedOff: {"txmq_batches_handed_off_total", "Buffered batches the backend refused, handed to the outbox.", "{batch}", []string{"queue"}},
	TimedOut: {"txmq_runs_timed_out_total", "Runs past their queue's RunTimeout by step (cancelled: ctx cancelled; stuck: still running after the grace, declared failed).",
		"{run}", []string{"queue", "step"}},
}

// RunDuration describes the histogram of listener run time, in seconds.
var RunDuration = Def{"txmq_run_duration_seconds", "Listener run time.", "s", []string{"queue"}}

// RunDurationBuckets are the histogram's bucket upper bounds: 1 ms times powers of 4, up to
// about 4.4 minutes, computed as Prometheus' ExponentialBuckets(0.001, 4, 10) does.
var RunDurationBuckets = exponentialBuckets(0.001, 4, 10)

func exponentialBuckets(start, factor float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = start
		start *= factor
	}
	return out
}

// Sink receives the updates of the hook metrics; the label values are in Def.Labels order.
type Sink interface {
	// Add adds v to counter c.
	Add(c Counter, v float64, labels ...string)
	// ObserveRun records one listener run of queue that took seconds.
	ObserveRun(queue string, seconds float64)
}

// Hooks returns node hooks that update s.
func Hooks(s Sink) *txmq.Hooks {
	return &txmq.Hooks{
		Published: func(queue string, messages int) {
			s.Add(BatchesPublished, 1, queue)
			s.Add(MessagesPublished, float64(messages), queue)
		},
		Delivered: func(queue string, _ int, _ int, took time.Duration, err error) {
			outcome := "success"
			if err != nil {
				outcome = "failure"
			}
			s.Add(Runs, 1, queue, outcome)
			s.ObserveRun(queue, took.Seconds())
		},
		Retried:   func(queue string, _ int, _ time.Duration) { s.Add(Retried, 1, queue) },
		Dropped:   func(queue, reason string, _ int) { s.Add(Dropped, 1, queue, reason) },
		HandedOff: func(queue string, _ int) { s.Add(HandedOff, 1, queue) },
		TimedOut: func(queue string, _ int, stuck bool) {
			step := "cancelled"
			if stuck {
				step = "stuck"
			}
			s.Add(TimedOut, 1, queue, step)
		},
	}
}
