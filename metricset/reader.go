package metricset

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// Gauge identifies one of the per-queue gauges.
type Gauge int

// The per-queue gauges.
const (
	Ready Gauge = iota
	InFlight
	Delayed
	OldestReadyAge
	Dead
	OutboxBacklog
	OutboxOldestAge
)

// Gauges describes the per-queue gauges, by Gauge; each has the one label "queue".
var Gauges = [...]Def{
	Ready:           {"txmq_queue_ready_batches", "Due, unclaimed batches in the backend.", "{batch}", []string{"queue"}},
	InFlight:        {"txmq_queue_in_flight_batches", "Batches claimed by a node under a lease.", "{batch}", []string{"queue"}},
	Delayed:         {"txmq_queue_delayed_batches", "Batches waiting for their due or retry time.", "{batch}", []string{"queue"}},
	OldestReadyAge:  {"txmq_queue_oldest_ready_age_seconds", "How long the longest-waiting ready batch has been claimable.", "s", []string{"queue"}},
	Dead:            {"txmq_queue_dead_batches", "Dead letters not replayed.", "{batch}", []string{"queue"}},
	OutboxBacklog:   {"txmq_outbox_backlog_batches", "Outbox rows not published yet.", "{batch}", []string{"queue"}},
	OutboxOldestAge: {"txmq_outbox_oldest_age_seconds", "Age of the oldest outbox row.", "s", []string{"queue"}},
}

// GaugeErrors describes the counter of failed gauge readings.
var GaugeErrors = Def{"txmq_queue_gauge_errors_total", "Readings of the queue gauges that failed; the last good values were reported.", "{reading}", nil}

// AppDB is what the gauges read from the app database: the outbox's backlog and the
// dead-letter counts. *outbox.Store implements it.
type AppDB interface {
	// Backlog returns the outbox rows waiting, by queue.
	Backlog(ctx context.Context) (map[string]outbox.Backlog, error)
	// DeadLetterCounts returns the dead batches (not replayed), by queue.
	DeadLetterCounts(ctx context.Context) (map[string]int64, error)
}

// Reader reads the per-queue gauges of every queue declared in a node's registry, from the
// backend (and the app database) at most once per CacheFor, however often it is asked.
type Reader struct {
	node     *txmq.Node
	db       AppDB
	cacheFor time.Duration
	timeout  time.Duration
	who      string // for log messages: "txmq prometheus"
	errors   atomic.Int64

	mu      sync.Mutex
	readAt  time.Time
	depths  map[string]core.Depth
	backlog map[string]outbox.Backlog
	deadN   map[string]int64
}

// NewReader returns a Reader; cacheFor and timeout default to 10 s and 5 s, db may be nil
// (no dead and outbox gauges), who names the caller in log messages.
func NewReader(node *txmq.Node, db AppDB, cacheFor, timeout time.Duration, who string) *Reader {
	if cacheFor <= 0 {
		cacheFor = 10 * time.Second
	}
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Reader{node: node, db: db, cacheFor: cacheFor, timeout: timeout, who: who}
}

// Errors returns how many readings failed (their part kept its last good values).
func (r *Reader) Errors() int64 { return r.errors.Load() }

// Each calls fn with every gauge value, reading first if the cached values are older than
// CacheFor. The oldest-ready age is computed at each call from the cached time, so it keeps
// growing between readings; it is left out for a queue with nothing ready or a backend that
// cannot tell. The dead and outbox gauges (with a db) cover every declared queue.
func (r *Reader) Each(fn func(g Gauge, v float64, queue string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.readAt) >= r.cacheFor {
		r.read()
	}
	for queue, d := range r.depths {
		fn(Ready, float64(d.Ready), queue)
		fn(InFlight, float64(d.InFlight), queue)
		fn(Delayed, float64(d.Delayed), queue)
		if !d.OldestReady.IsZero() {
			fn(OldestReadyAge, max(time.Since(d.OldestReady), 0).Seconds(), queue)
		}
	}
	if r.db != nil {
		for _, queue := range r.node.Registry().Names() {
			fn(Dead, float64(r.deadN[queue]), queue)
			b := r.backlog[queue]
			fn(OutboxBacklog, float64(b.Rows), queue)
			fn(OutboxOldestAge, b.OldestAge.Seconds(), queue)
		}
	}
}

// read refreshes the cached values; a part that fails keeps its last values. Called with mu.
func (r *Reader) read() {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	r.readAt = time.Now()
	if d, err := r.node.Depths(ctx); err == nil {
		r.depths = d
	} else {
		r.errors.Add(1)
		r.node.Logger().Warn(r.who+": reading queue depths failed; reporting the last values", "error", err)
	}
	if r.db == nil {
		return
	}
	if b, err := r.db.Backlog(ctx); err == nil {
		r.backlog = b
	} else {
		r.errors.Add(1)
		r.node.Logger().Warn(r.who+": reading the outbox backlog failed; reporting the last values", "error", err)
	}
	if d, err := r.db.DeadLetterCounts(ctx); err == nil {
		r.deadN = d
	} else {
		r.errors.Add(1)
		r.node.Logger().Warn(r.who+": reading dead-letter counts failed; reporting the last values", "error", err)
	}
}
