package prometheus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	txmqprom "github.com/txmq/txmq/prometheus"
)

// TestMetricsAfterRun runs a node with the Prometheus hooks and scrapes the registry.
func TestMetricsAfterRun(t *testing.T) {
	t.Parallel()
	reg := promclient.NewRegistry()
	hooks, err := txmqprom.NewHooks(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txmqprom.NewHooks(reg); err != nil { // a second node in the same process
		t.Fatalf("second registration: %v", err)
	}
	qreg := txmq.NewRegistry()
	ok := txmq.MustDeclareIn(qreg, "ok", txmq.QueueConfig[int]{Transactional: txmq.Try})
	bad := txmq.MustDeclareIn(qreg, "bad", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxAttempts: 2})
	be := memory.New(nil)
	defer be.Close()
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: qreg, Hooks: hooks,
		Backoff: func(int) time.Duration { return time.Millisecond }, FlushWindow: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_ = ok.Listen(n, func(context.Context, []int) error { return nil })
	_ = bad.Listen(n, func(context.Context, []int) error { return errors.New("boom") })
	ctx := context.Background()
	_ = n.Start(ctx)
	_ = ok.PublishMany(ctx, n, []int{1, 2, 3})
	_ = bad.Publish(ctx, n, 1)
	deadline := time.Now().Add(10 * time.Second)
	for n.Stats().Dropped[core.ReasonDeliveryExhausted] == 0 || n.Stats().Succeeded == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("run did not finish: %+v", n.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = n.Close(ctx)

	want := `
# HELP txmq_batches_dropped_total Dropped batches by reason (delivery_exhausted, worker_lost, undecodable, outbox_handoff_failed, rejected, ...).
# TYPE txmq_batches_dropped_total counter
txmq_batches_dropped_total{queue="bad",reason="delivery_exhausted"} 1
# HELP txmq_messages_published_total Messages stored in the backend.
# TYPE txmq_messages_published_total counter
txmq_messages_published_total{queue="bad"} 1
txmq_messages_published_total{queue="ok"} 3
# HELP txmq_runs_total Listener runs by outcome (success, failure).
# TYPE txmq_runs_total counter
txmq_runs_total{outcome="failure",queue="bad"} 2
txmq_runs_total{outcome="success",queue="ok"} 1
# HELP txmq_batches_retried_total Failed batches scheduled for another run.
# TYPE txmq_batches_retried_total counter
txmq_batches_retried_total{queue="bad"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"txmq_batches_dropped_total", "txmq_messages_published_total", "txmq_runs_total", "txmq_batches_retried_total"); err != nil {
		t.Fatal(err)
	}
	if c := testutil.CollectAndCount(reg, "txmq_run_duration_seconds"); c != 2 {
		t.Fatalf("run duration series: %d, want 2", c)
	}
}
