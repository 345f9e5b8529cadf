package prometheus

import (
	"context"
	"sync"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
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
	node *txmq.Node
	o    GaugeOptions

	ready, inFlight, delayed, oldestReady, dead, outboxRows, outboxAge *promclient.Desc
	errors                                                             promclient.Counter

	mu      sync.Mutex
	readAt  time.Time
	depths  map[string]core.Depth
	backlog map[string]outbox.Backlog
	deadN   map[string]int64
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
	if o.CacheFor <= 0 {
		o.CacheFor = 10 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	q := []string{"queue"}
	return &QueueCollector{
		node:     node,
		o:        o,
		ready:    promclient.NewDesc("txmq_queue_ready_batches", "Due, unclaimed batches in the backend.", q, nil),
		inFlight: promclient.NewDesc("txmq_queue_in_flight_batches", "Batches claimed by a node under a lease.", q, nil),
		delayed:  promclient.NewDesc("txmq_queue_delayed_batches", "Batches waiting for their due or retry time.", q, nil),
		oldestReady: promclient.NewDesc("txmq_queue_oldest_ready_age_seconds",
			"How long the longest-waiting ready batch has been claimable.", q, nil),
		dead:       promclient.NewDesc("txmq_queue_dead_batches", "Dead letters not replayed.", q, nil),
		outboxRows: promclient.NewDesc("txmq_outbox_backlog_batches", "Outbox rows not published yet.", q, nil),
		outboxAge:  promclient.NewDesc("txmq_outbox_oldest_age_seconds", "Age of the oldest outbox row.", q, nil),
		errors: promclient.NewCounter(promclient.CounterOpts{Name: "txmq_queue_gauge_errors_total",
			Help: "Readings of the queue gauges that failed; the last good values were reported."}),
	}
}

// Describe implements promclient.Collector.
func (c *QueueCollector) Describe(ch chan<- *promclient.Desc) {
	for _, d := range []*promclient.Desc{c.ready, c.inFlight, c.delayed, c.oldestReady, c.dead, c.outboxRows, c.outboxAge} {
		ch <- d
	}
	c.errors.Describe(ch)
}

// Collect implements promclient.Collector: it reads the depths if the cached ones are older
// than CacheFor, then reports them.
func (c *QueueCollector) Collect(ch chan<- promclient.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.readAt) >= c.o.CacheFor {
		c.read()
	}
	gauge := func(d *promclient.Desc, v float64, queue string) {
		ch <- promclient.MustNewConstMetric(d, promclient.GaugeValue, v, queue)
	}
	for queue, d := range c.depths {
		gauge(c.ready, float64(d.Ready), queue)
		gauge(c.inFlight, float64(d.InFlight), queue)
		gauge(c.delayed, float64(d.Delayed), queue)
		if !d.OldestReady.IsZero() {
			gauge(c.oldestReady, max(time.Since(d.OldestReady), 0).Seconds(), queue)
		}
	}
	if c.o.DB != nil {
		for _, queue := range c.node.Registry().Names() {
			gauge(c.dead, float64(c.deadN[queue]), queue)
			b := c.backlog[queue]
			gauge(c.outboxRows, float64(b.Rows), queue)
			gauge(c.outboxAge, b.OldestAge.Seconds(), queue)
		}
	}
	c.errors.Collect(ch)
}

// read refreshes the cached values; a part that fails keeps its last values. Called with mu.
func (c *QueueCollector) read() {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.Timeout)
	defer cancel()
	c.readAt = time.Now()
	if d, err := c.node.Depths(ctx); err == nil {
		c.depths = d
	} else {
		c.errors.Inc()
		c.node.Logger().Warn("txmq prometheus: reading queue depths failed; reporting the last values", "error", err)
	}
	if c.o.DB == nil {
		return
	}
	if b, err := c.o.DB.Backlog(ctx); err == nil {
		c.backlog = b
	} else {
		c.errors.Inc()
		c.node.Logger().Warn("txmq prometheus: reading the outbox backlog failed; reporting the last values", "error", err)
	}
	if d, err := c.o.DB.DeadLetterCounts(ctx); err == nil {
		c.deadN = d
	} else {
		c.errors.Inc()
		c.node.Logger().Warn("txmq prometheus: reading dead-letter counts failed; reporting the last values", "error", err)
	}
}
