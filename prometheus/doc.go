// Package prometheus bridges a node's txmq.Hooks to Prometheus metrics, and reports per-queue
// depth gauges read at scrape time (NewQueueCollector).
//
//	hooks, err := prometheus.NewHooks(promclient.DefaultRegisterer)
//	node, err := txmq.NewNode(b, &txmq.NodeOptions{Hooks: hooks})
//
// Metrics (all labelled by queue):
//
//	txmq_batches_published_total          batches stored in the backend
//	txmq_messages_published_total         messages in them
//	txmq_runs_total{outcome}              listener runs, outcome "success" or "failure"
//	txmq_run_duration_seconds             listener run time (histogram)
//	txmq_batches_retried_total            failed batches scheduled for another run
//	txmq_batches_dropped_total{reason}    dropped batches, reason as in core's Reason constants
//	txmq_batches_handed_off_total         buffered batches the backend refused, moved to the outbox
//	txmq_runs_timed_out_total{step}       runs past their RunTimeout, step "cancelled" or "stuck"
//
// Gauges, from NewQueueCollector, read from the backend (and the app database) at most once per
// GaugeOptions.CacheFor (10 s), whatever the scrape rate:
//
//	promclient.MustRegister(prometheus.NewQueueCollector(app.Node, &prometheus.GaugeOptions{DB: app.Store}))
//
//	txmq_queue_ready_batches, txmq_queue_in_flight_batches, txmq_queue_delayed_batches,
//	txmq_queue_oldest_ready_age_seconds (omitted for a queue with nothing ready, and on NATS
//	and SQS, which cannot tell), txmq_queue_dead_batches, txmq_outbox_backlog_batches,
//	txmq_outbox_oldest_age_seconds (all labelled by queue), txmq_queue_gauge_errors_total
//
// Package otel offers the same metrics, same names, through OpenTelemetry (NewMetricHooks,
// RegisterQueueGauges); both take them from one definition (package metricset).
//
// It is a module of its own (go get github.com/txmq/txmq/prometheus), so only apps that use it
// require the Prometheus client.
package prometheus
