package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/envelope"
)

func init() {
	register(&command{name: "demo", summary: "walk through txmq on the embedded memory backend or a SQLite file (no server needed)", run: runDemo})
}

// Signup, Order and Report are the demo's message types.
type Signup struct {
	Email string `json:"email"`
	Plan  string `json:"plan"`
}

// Order is a message of the demo's routing and retry queues.
type Order struct {
	ID int `json:"id"`
}

// Report is a message for the demo's exclusive queue.
type Report struct {
	Name string `json:"name"`
}

const demoSynopsis = `demo [-n messages] [-v] [--backend URL] [--database-url URL] [--schema S]

Runs a small app on the in-process memory backend (or --backend, e.g. sqlite://demo.db: SQL
jobs in a SQLite file, durable, still no server) and shows, in a few seconds: batching,
routing (Require/Try/Never inside a transaction that commits and one that rolls back; this
needs an app database: --database-url or TXMQ_DATABASE_URL (postgres://, mysql://, sqlite://),
else with --backend sqlite://FILE the same file, else it is skipped),
retries ending in a dead letter that is then replayed, an Exclusive queue, a delayed message,
and a summary table. Without a database the dead letter is kept in memory.`

// demo holds the demo's queues, counters and output.
type demo struct {
	out       io.Writer
	node      *txmq.Node
	backend   core.Backend
	db        *demoDB // nil without a database
	sink      *countingSink
	delivered map[string]*atomic.Int64
	published map[string]int64
	failed    atomic.Int64 // failed runs of the invoices queue
	fixed     atomic.Bool  // the invoices listener succeeds from now on
	inFlight  atomic.Int64 // reports batches running now
	maxFlight atomic.Int64
	runs      atomic.Int64 // runs (batches) of the reports listener
	onError   atomic.Int64
	replayed  int
	delayedAt chan time.Time
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", demoSynopsis, stderr)
	count := fs.Int("n", 2000, "signups to publish in the burst")
	backendURL := fs.String("backend", "memory://", "backend the demo runs on (memory:// in the process; sqlite://demo.db keeps its batches in a file)")
	verbose := fs.Bool("v", false, "print the engine's logs")
	dbURL := fs.String("database-url", os.Getenv("TXMQ_DATABASE_URL"), "app database for the routing step (default $TXMQ_DATABASE_URL; empty: the --backend sqlite:// file, else routing is skipped)")
	schema := fs.String("schema", "txmq_demo", "schema of the demo's outbox and dead-letter tables (created if missing; none on SQLite)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if *count < 1 {
		return &usageError{msg: "-n must be at least 1"}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	logLevel := slog.LevelError + 1
	if *verbose {
		logLevel = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel}))
	d := &demo{
		out:       &lockedWriter{w: stdout}, // listeners print from the node's goroutines
		delivered: map[string]*atomic.Int64{},
		published: map[string]int64{},
		delayedAt: make(chan time.Time, 1),
	}
	start := time.Now()

	// Queues are declared once, each with its settings.
	reg := txmq.NewRegistry()
	signups := txmq.MustDeclareIn(reg, "signups", txmq.QueueConfig[Signup]{Transactional: txmq.Try, MaxConcurrentBatches: txmq.Cap(4)})
	orders := txmq.MustDeclareIn(reg, "orders", txmq.QueueConfig[Order]{Transactional: txmq.Require})
	emails := txmq.MustDeclareIn(reg, "emails", txmq.QueueConfig[Order]{Transactional: txmq.Try})
	audit := txmq.MustDeclareIn(reg, "audit", txmq.QueueConfig[Order]{Transactional: txmq.Never})
	invoices := txmq.MustDeclareIn(reg, "invoices", txmq.QueueConfig[Order]{
		Transactional: txmq.Never, MaxAttempts: 3,
		OnError: func([]Order, error, int) error { d.onError.Add(1); return nil },
	})
	reports := txmq.MustDeclareIn(reg, "reports", txmq.QueueConfig[Report]{Transactional: txmq.Never, Exclusive: true, MaxBatchMessages: 1})
	reminders := txmq.MustDeclareIn(reg, "reminders", txmq.QueueConfig[Signup]{Transactional: txmq.Never})
	for _, q := range []string{"signups", "orders", "emails", "audit", "invoices", "reports", "reminders"} {
		d.delivered[q] = &atomic.Int64{}
	}

	// A node on the embedded backend (or --backend); with a database, the outbox store too.
	if err := checkBackendURL(backendSetting, *backendURL, true); err != nil {
		return err
	}
	scheme, _, _ := strings.Cut(strings.ToLower(*backendURL), ":")
	if scheme == "memory" {
		d.backend = memory.New(nil)
	} else {
		be, err := core.OpenBackend(ctx, *backendURL)
		if err != nil {
			return fmt.Errorf("%s: %w", backendSetting, err)
		}
		d.backend = be
	}
	defer d.backend.Close()
	d.sink = &countingSink{}
	if *dbURL == "" && (scheme == "sqlite" || scheme == "sqlite3") {
		// No server anywhere: the outbox and dead letters go into the backend's file, so the
		// routing step runs with a real transaction on it.
		*dbURL = *backendURL
	}
	if *dbURL != "" {
		db, err := openDemoDB(ctx, *dbURL, *schema, d.backend, logger)
		if err != nil {
			return err
		}
		defer db.close()
		d.db, d.sink.next = db, db.store
	}
	nodeOpts := &txmq.NodeOptions{
		Registry: reg, Logger: logger, DeadLetters: d.sink,
		Backoff: txmq.ExponentialBackoff(50*time.Millisecond, time.Second),
	}
	if d.db != nil {
		nodeOpts.Handoff = d.db.store
	}
	node, err := txmq.NewNode(d.backend, nodeOpts)
	if err != nil {
		return err
	}
	d.node = node
	defer func() { _ = node.Close(context.WithoutCancel(ctx)) }()

	// One listener per queue.
	count2 := func(q string) func(context.Context, []Order) error {
		return func(_ context.Context, msgs []Order) error { d.delivered[q].Add(int64(len(msgs))); return nil }
	}
	listen := []error{
		signups.Listen(node, func(_ context.Context, msgs []Signup) error { d.delivered["signups"].Add(int64(len(msgs))); return nil }),
		orders.Listen(node, count2("orders")), emails.Listen(node, count2("emails")), audit.Listen(node, count2("audit")),
		invoices.Listen(node, func(_ context.Context, msgs []Order) error {
			if !d.fixed.Load() {
				d.failed.Add(1)
				return fmt.Errorf("invoice %d: payment provider says no", msgs[0].ID)
			}
			d.delivered["invoices"].Add(int64(len(msgs)))
			return nil
		}),
		reports.Listen(node, func(_ context.Context, msgs []Report) error {
			d.runs.Add(1)
			n := d.inFlight.Add(1)
			defer d.inFlight.Add(-1)
			for m := d.maxFlight.Load(); n > m && !d.maxFlight.CompareAndSwap(m, n); m = d.maxFlight.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			d.delivered["reports"].Add(int64(len(msgs)))
			return nil
		}),
		reminders.Listen(node, func(_ context.Context, msgs []Signup) error {
			d.delivered["reminders"].Add(int64(len(msgs)))
			select {
			case d.delayedAt <- time.Now():
			default:
			}
			return nil
		}),
	}
	if err := errors.Join(listen...); err != nil {
		return err
	}
	if err := node.Start(ctx); err != nil {
		return err
	}
	where := "no app database (set TXMQ_DATABASE_URL to see the outbox)"
	if d.db != nil {
		where = fmt.Sprintf("app database %s, schema %s", core.Redact(*dbURL), *schema)
		if d.db.pool == nil && (strings.HasPrefix(strings.ToLower(*dbURL), "sqlite")) {
			where = fmt.Sprintf("app database %s (the outbox and dead letters in the file)", *dbURL)
		}
	}
	d.printf("txmq demo: %s backend, %s\n\n", scheme, where)

	// 1. Batching: a burst of small publishes becomes a few batches.
	before := node.Stats().Succeeded
	for i := range *count {
		if err := signups.Publish(ctx, node, Signup{Email: fmt.Sprintf("user%d@example.com", i), Plan: "free"}); err != nil {
			return err
		}
	}
	d.published["signups"] = int64(*count)
	if err := d.wait(ctx, "the burst", func() bool { return d.delivered["signups"].Load() >= int64(*count) }); err != nil {
		return err
	}
	d.printf("1. batching   %d signups published one by one, delivered in %d batches (MaxBatchMessages 100)\n", *count, node.Stats().Succeeded-before)

	// 2. Routing.
	if err := d.routing(ctx, orders, emails, audit); err != nil {
		return err
	}

	// 3. Retries, a dead letter, a replay.
	if err := d.retries(ctx, invoices); err != nil {
		return err
	}

	// 4. Exclusive: several batches, never two at once.
	const nReports = 6
	for i := range nReports {
		if err := reports.Publish(ctx, node, Report{Name: fmt.Sprintf("report-%d", i)}); err != nil {
			return err
		}
	}
	d.published["reports"] = nReports
	if err := d.wait(ctx, "the reports", func() bool { return d.delivered["reports"].Load() >= nReports }); err != nil {
		return err
	}
	d.printf("4. exclusive  %d reports published, run as %d batches of an Exclusive queue: max in flight observed %d (one at a time, cluster-wide)\n", nReports, d.runs.Load(), d.maxFlight.Load())

	// 5. A delayed message.
	const delay = 300 * time.Millisecond
	sent := time.Now()
	if err := reminders.Publish(ctx, node, Signup{Email: "later@example.com"}, txmq.After(delay)); err != nil {
		return err
	}
	d.published["reminders"] = 1
	var got time.Time
	select {
	case got = <-d.delayedAt:
	case <-ctx.Done():
		return fmt.Errorf("timed out waiting for the delayed message: %w", ctx.Err())
	}
	d.printf("5. delay      published with After(%v), delivered %v later (never early)\n", delay, got.Sub(sent).Round(time.Millisecond))

	closeCtx, cancelClose := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelClose()
	if err := node.Close(closeCtx); err != nil {
		return err
	}
	if err := d.summary(time.Since(start)); err != nil {
		return err
	}
	if d.db != nil {
		// The tables stay, so that txmq dlq and txmq outbox can show what the demo left; say
		// where they are and how to remove them rather than leave a schema behind silently.
		d.printf("\nthe demo's tables stay in %s\n", d.db.where)
	}
	return nil
}

// routing publishes one message to each routing mode inside a transaction that commits and
// one that rolls back (with a database), and outside any transaction.
func (d *demo) routing(ctx context.Context, orders, emails, audit *txmq.Queue[Order]) error {
	publishAll := func(ctx context.Context, id int) error {
		return errors.Join(orders.Publish(ctx, d.node, Order{ID: id}), emails.Publish(ctx, d.node, Order{ID: id}), audit.Publish(ctx, d.node, Order{ID: id}))
	}
	routed := func() string {
		return fmt.Sprintf("orders %d, emails %d, audit %d", d.delivered["orders"].Load(), d.delivered["emails"].Load(), d.delivered["audit"].Load())
	}
	if d.db == nil {
		d.printf("2. routing    skipped: Require/Try/Never inside a transaction need an app database (set TXMQ_DATABASE_URL=postgres://...)\n")
	} else {
		if err := d.db.runInTx(ctx, func(ctx context.Context) error { return publishAll(ctx, 1) }); err != nil {
			return fmt.Errorf("routing: the committing transaction: %w", err)
		}
		errRollback := errors.New("the business code failed")
		if err := d.db.runInTx(ctx, func(ctx context.Context) error {
			if err := publishAll(ctx, 2); err != nil {
				return err
			}
			return errRollback
		}); !errors.Is(err, errRollback) {
			return fmt.Errorf("routing: the rolled-back transaction returned %v", err)
		}
		for _, q := range []string{"orders", "emails", "audit"} {
			d.published[q]++ // the committed one; the rolled-back one is never published
		}
		if err := d.wait(ctx, "the committed messages", func() bool {
			return d.delivered["orders"].Load() >= 1 && d.delivered["emails"].Load() >= 1 && d.delivered["audit"].Load() >= 1
		}); err != nil {
			return err
		}
		d.printf("2. routing    a transaction that commits: Require (orders) and Try (emails) wrote outbox rows, Never (audit) waited for the commit\n")
		d.printf("              one that rolls back: nothing published. Delivered: %s\n", routed())
	}
	// Outside a transaction: Try and Never publish at once, Require refuses.
	err := orders.Publish(ctx, d.node, Order{ID: 3})
	if !errors.Is(err, core.ErrNoTransaction) {
		return fmt.Errorf("routing: Require outside a transaction returned %v, want core.ErrNoTransaction", err)
	}
	if err := errors.Join(emails.Publish(ctx, d.node, Order{ID: 3}), audit.Publish(ctx, d.node, Order{ID: 3})); err != nil {
		return err
	}
	d.published["emails"]++
	d.published["audit"]++
	if err := d.wait(ctx, "the messages published outside a transaction", func() bool {
		return d.delivered["emails"].Load() >= d.published["emails"] && d.delivered["audit"].Load() >= d.published["audit"]
	}); err != nil {
		return err
	}
	d.printf("              outside a transaction: Try and Never publish at once, Require is refused (txmq.ErrNoTransaction)\n")
	return nil
}

// retries publishes a message whose listener fails until the budget is spent, waits for its
// dead letter, fixes the listener and replays it.
func (d *demo) retries(ctx context.Context, invoices *txmq.Queue[Order]) error {
	if err := invoices.Publish(ctx, d.node, Order{ID: 42}); err != nil {
		return err
	}
	d.published["invoices"] = 1
	if err := d.wait(ctx, "the dead letter", func() bool { return d.sink.count() >= 1 && d.onError.Load() >= 1 }); err != nil {
		return err
	}
	dl := d.sink.last()
	calls := fmt.Sprintf("%d times", d.onError.Load())
	if d.onError.Load() == 1 {
		calls = "once"
	}
	d.printf("3. retries    invoice 42 failed %d runs (budget 3) and became a dead letter: reason %s, OnError called %s\n", d.failed.Load(), dl.Reason, calls)
	d.fixed.Store(true)
	if err := d.replay(ctx, dl); err != nil {
		return err
	}
	d.replayed++
	if err := d.wait(ctx, "the replayed invoice", func() bool { return d.delivered["invoices"].Load() >= 1 }); err != nil {
		return err
	}
	d.printf("   replay     listener fixed, dead letter replayed with a fresh budget: delivered %d\n", d.delivered["invoices"].Load())
	return nil
}

// replay publishes a dead letter again: through the outbox store with a database (as txmq dlq
// replay does), else straight to the backend.
func (d *demo) replay(ctx context.Context, dl *core.DeadLetter) error {
	if d.db != nil {
		return d.db.replay(ctx, dl)
	}
	body, err := envelope.ForReplay(dl.Body)
	if err != nil {
		return err
	}
	return d.backend.Publish(ctx, core.OutgoingBatch{ID: dl.BatchID, Queue: dl.Queue, Body: body, Exclusive: dl.Exclusive, Messages: dl.Messages})
}

// wait polls cond until it holds or ctx ends.
func (d *demo) wait(ctx context.Context, what string, cond func() bool) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s (raise --timeout, or run with -v to see the engine's logs): %w", what, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

// dropped formats Stats.Dropped as reason=count, sorted.
func dropped(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for r, n := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", r, n))
	}
	sortStrings(parts)
	return strings.Join(parts, " ")
}

// countingSink counts dead letters and keeps the last, passing each to next when set.
type countingSink struct {
	next    core.DeadLetterSink
	mu      sync.Mutex
	n       int
	byQueue map[string]int
	dl      *core.DeadLetter
}

// DeadLetter implements core.DeadLetterSink.
func (s *countingSink) DeadLetter(ctx context.Context, dl *core.DeadLetter) error {
	if s.next != nil {
		if err := s.next.DeadLetter(ctx, dl); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if s.byQueue == nil {
		s.byQueue = map[string]int{}
	}
	s.byQueue[dl.Queue]++
	s.dl = dl
	return nil
}

func (s *countingSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *countingSink) queue(q string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byQueue[q]
}

func (s *countingSink) last() *core.DeadLetter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dl
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
