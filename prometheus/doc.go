// Package prometheus bridges a node's core.Hooks to Prometheus metrics.
//
//	hooks, err := prometheus.NewHooks(promclient.DefaultRegisterer)
//	node, err := core.NewNode(&core.NodeOptions{Backend: b, Hooks: hooks})
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
package prometheus
