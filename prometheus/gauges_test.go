package prometheus_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	txmqprom "github.com/txmq/txmq/prometheus"
)

// countingBackend counts Depths calls and can fail them.
type countingBackend struct {
	core.Backend
	depths atomic.Int64
	fail   atomic.Bool
}

func (c *countingBackend) Depths(ctx context.Context, queues []string) (map[string]core.Depth, error) {
	c.depths.Add(1)
	if c.fail.Load() {
		return nil, errors.New("test: depths refused")
	}
	return c.Backend.Depths(ctx, queues)
}

type fakeDB struct{}

func (fakeDB) Backlog(context.Context) (map[string]outbox.Backlog, error) {
	return map[string]outbox.Backlog{"gauged": {Rows: 4, OldestAge: 90 * time.Second}}, nil
}

func (fakeDB) DeadLetterCounts(context.Context) (map[string]int64, error) {
	return map[string]int64{"gauged": 2}, nil
}

// gaugedNode returns an unstarted node on a counting memory backend holding delayed one-message
// batches and ready ones of queue.
func gaugedNode(t *testing.T, queue string, delayed, ready int) (*txmq.Node, *countingBackend) {
	t.Helper()
	qreg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(qreg, queue, txmq.QueueConfig[int]{Transactional: txmq.Try, MaxBatchMessages: 1})
	mem := memory.New(nil)
	t.Cleanup(func() { _ = mem.Close() })
	be := &countingBackend{Backend: mem}
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: qreg, FlushWindow: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	for i := range delayed + ready {
		var opts []txmq.PublishOption
		if i < delayed {
			opts = append(opts, txmq.After(time.Hour))
		}
		if err := q.Publish(context.Background(), n, i, opts...); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for n.Stats().PublishedBatches < int64(delayed+ready) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return n, be
}

func TestQueueCollector(t *testing.T) {
	t.Parallel()
	n, be := gaugedNode(t, "gauged", 3, 1)
	reg := promclient.NewRegistry()
	c := txmqprom.NewQueueCollector(n, &txmqprom.GaugeOptions{CacheFor: time.Hour, DB: fakeDB{}})
	reg.MustRegister(c)
	want := `
# HELP txmq_queue_delayed_batches Batches waiting for their due or retry time.
# TYPE txmq_queue_delayed_batches gauge
txmq_queue_delayed_batches{queue="gauged"} 3
# HELP txmq_queue_ready_batches Due, unclaimed batches in the backend.
# TYPE txmq_queue_ready_batches gauge
txmq_queue_ready_batches{queue="gauged"} 1
# HELP txmq_queue_dead_batches Dead letters not replayed.
# TYPE txmq_queue_dead_batches gauge
txmq_queue_dead_batches{queue="gauged"} 2
# HELP txmq_outbox_backlog_batches Outbox rows not published yet.
# TYPE txmq_outbox_backlog_batches gauge
txmq_outbox_backlog_batches{queue="gauged"} 4
# HELP txmq_outbox_oldest_age_seconds Age of the oldest outbox row.
# TYPE txmq_outbox_oldest_age_seconds gauge
txmq_outbox_oldest_age_seconds{queue="gauged"} 90
`
	names := []string{"txmq_queue_delayed_batches", "txmq_queue_ready_batches", "txmq_queue_dead_batches", "txmq_outbox_backlog_batches", "txmq_outbox_oldest_age_seconds"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	// Many scrapes within CacheFor ask the backend once.
	for range 20 {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	if got := be.depths.Load(); got != 1 {
		t.Fatalf("21 scrapes within CacheFor asked the backend %d times, want 1", got)
	}
}

func TestQueueCollectorKeepsLastValuesOnError(t *testing.T) {
	t.Parallel()
	n, be := gaugedNode(t, "gaugerr", 1, 0)
	reg := promclient.NewRegistry()
	reg.MustRegister(txmqprom.NewQueueCollector(n, &txmqprom.GaugeOptions{CacheFor: time.Nanosecond}))
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	be.fail.Store(true)
	want := `
# HELP txmq_queue_delayed_batches Batches waiting for their due or retry time.
# TYPE txmq_queue_delayed_batches gauge
txmq_queue_delayed_batches{queue="gaugerr"} 1
# HELP txmq_queue_gauge_errors_total Readings of the queue gauges that failed; the last good values were reported.
# TYPE txmq_queue_gauge_errors_total counter
txmq_queue_gauge_errors_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "txmq_queue_delayed_batches", "txmq_queue_gauge_errors_total"); err != nil {
		t.Fatal(err)
	}
}

// oldestReadyAge returns the txmq_queue_oldest_ready_age_seconds sample of queue, ok false when
// there is none.
func oldestReadyAge(t *testing.T, reg *promclient.Registry, queue string) (age float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "txmq_queue_oldest_ready_age_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && l.GetValue() == queue {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

func TestGaugeOldestReadyAge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		delayed, ready int
		wantSample     bool
	}{
		{"gauge-old-ready", 1, 2, true},
		{"gauge-old-none-ready", 2, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, be := gaugedNode(t, tt.name, tt.delayed, tt.ready)
			time.Sleep(50 * time.Millisecond) // the ready batches wait
			reg := promclient.NewRegistry()
			reg.MustRegister(txmqprom.NewQueueCollector(n, &txmqprom.GaugeOptions{CacheFor: time.Hour}))
			first, ok := oldestReadyAge(t, reg, tt.name)
			if ok != tt.wantSample {
				t.Fatalf("oldest-ready age sample present = %v (value %v), want %v", ok, first, tt.wantSample)
			}
			if !ok {
				return
			}
			if first <= 0 {
				t.Fatalf("age of a ready batch that waited 50 ms = %v s, want > 0", first)
			}
			time.Sleep(50 * time.Millisecond)
			// The age is computed at scrape time from the cached reading: it grows without a
			// second backend call.
			if second, _ := oldestReadyAge(t, reg, tt.name); second <= first {
				t.Fatalf("age went from %v to %v s across scrapes 50 ms apart; want it to grow", first, second)
			}
			if got := be.depths.Load(); got != 1 {
				t.Fatalf("2 scrapes within CacheFor asked the backend %d times, want 1", got)
			}
		})
	}
}
