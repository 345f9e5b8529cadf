package prometheus

import (
	"context"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/metricset"
	"github.com/txmq/txmq/outbox"
)

// AppDB is what the queue collector reads from the app database: the outbox's backlog and the
// dead-letter counts. *outbox.Store implements it.
type AppDB interface {
	// Backlog returns the outbox rows waiting, by queue.
	Backlog(ctx context.Context) (map[string]outbox.Backlog, error)
	// DeadLetterCounts returns the dead batches (not replayed), by queue.
	DeadLetterCounts(ctx context.Context) (map[string]int64, error)
}

// GaugeOptions configures NewQueueCollector; nil means every default.
type GaugeOptions struct {
	// CacheFor is how long one reading serves scrapes: the backend and the app database are
	// asked at most once per CacheFor, however often and by however many scrapers the registry
	// is scraped. Default 10 s.
	CacheFor time.Duration
	// Timeout bounds one reading. Default 5 s. A reading that fails or times out keeps the last
	// good values and counts an error (txmq_queue_gauge_errors_total).
	Timeout time.Duration
	// DB adds the outbox backlog and dead letters (an *outbox.Store, e.g. App.Store); nil
	// leaves those gauges out.
	DB AppDB
}

// QueueCollector reports per-queue gauges read at scrape time (see NewQueueCollector).
type QueueCollector struct {
	r      *metricset.Reader
	descs  [len(metricset.Gauges)]*promclient.Desc
	errors *promclient.Desc
}

// NewQueueCollector returns a collector of the depths of every queue declared in node's
// registry, read when the registry is scraped, at most once per GaugeOptions.CacheFor:
//
//	txmq_queue_ready_batches{queue}             due, unclaimed batches in the backend
//	txmq_queue_in_flight_batches{queue}         batches claimed by a node under a lease
//	txmq_queue_delayed_batches{queue}           batches waiting for their due or retry time
//	txmq_queue_oldest_ready_age_seconds{queue}  how long the longest-waiting ready batch has been
//	                                            claimable (omitted when none is ready or the
//	                                            backend cannot tell: NATS, SQS)
//	txmq_queue_dead_batches{queue}              dead letters not replayed (with GaugeOptions.DB)
//	txmq_outbox_backlog_batches{queue}          outbox rows not published yet (with DB)
//	txmq_outbox_oldest_age_seconds{queue}       age of the oldest outbox row (with DB)
//	txmq_queue_gauge_errors_total               readings that failed (the last values stay)
//
// The oldest-ready age is computed at each scrape from the cached core.Depth.OldestReady, so it
// keeps growing between readings. Backends with approximate counts (SQS) report theirs. Register it with
// promclient.MustRegister(NewQueueCollector(app.Node, &GaugeOptions{DB: app.Store})); one
// collector per process is enough, since the depths are the backend's, not the node's.
func NewQueueCollector(node *txmq.Node, opts *GaugeOptions) *QueueCollector {
	var o GaugeOptions
	if opts != nil {
		o = *opts
	}
	c := &QueueCollector{r: metricset.NewReader(node, o.DB, o.CacheFor, o.Timeout, "txmq prometheus")}
	for g, d := range metricset.Gauges {
		c.descs[g] = promclient.NewDesc(d.Name, d.Help, d.Labels, nil)
	}
	c.errors = promclient.NewDesc(metricset.GaugeErrors.Name, metricset.GaugeErrors.Help, nil, nil)
	return c
}

// Describe implements promclient.Collector.
func (c *QueueCollector) Describe(ch chan<- *promclient.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.errors
}

// Collect implements promclient.Collector: it reads the depths if the cached ones are older
// than CacheFor, then reports them.
func (c *QueueCollector) Collect(ch chan<- promclient.Metric) {
	c.r.Each(func(g metricset.Gauge, v float64, queue string) {
		ch <- promclient.MustNewConstMetric(c.descs[g], promclient.GaugeValue, v, queue)
	})
	ch <- promclient.MustNewConstMetric(c.errors, promclient.CounterValue, float64(c.r.Errors()))
}
