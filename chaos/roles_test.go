package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/txmq/txmq/adapters/all" // every backend's URL scheme

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/ledger"
)

// msg is the message of both chaos queues: a key unique across the whole scenario.
type msg struct {
	K string `json:"k"`
}

// The two queues every role declares (the processes are the same binary): an ordinary queue
// capped per node, and an Exclusive one whose runs must never overlap across processes. Both
// are Try, so the publisher's transactional half goes through the outbox and the other half
// is immediate. MaxAttempts is high so that only a real loss (never the retry policy) can
// make a committed message missing.
var (
	workQueue = txmq.MustDeclare("chaos_work", txmq.QueueConfig[msg]{
		Transactional: txmq.Try, MaxBatchMessages: 20, MaxConcurrentBatches: txmq.Cap(4), MaxAttempts: 25,
	})
	exclQueue = txmq.MustDeclare("chaos_excl", txmq.QueueConfig[msg]{
		Transactional: txmq.Try, MaxBatchMessages: 20, Exclusive: true, MaxAttempts: 25,
	})
)

// How long a run of each queue works (honouring its ctx): long enough for an Exclusive run to
// be caught in flight by a fault, short enough for the Exclusive queue to keep up.
const (
	workRunTime = 200 * time.Millisecond
	exclRunTime = 25 * time.Millisecond
)

// slowMarker is a file in the scenario's directory (CHAOS_DIR): a run of the Exclusive queue
// that starts while it exists works until it is gone (the fault ended) and slowTail longer,
// at most slowRunTime in all (still honouring its ctx), so that a backend fault catches one in
// flight for longer than the lease, and the run goes on past the fault for as long as another
// node needs to claim its batch if the lease was lost (a lease, then a poll). A node that
// fences itself cancels such a run before its lease can end; one that does not keeps running
// while another node claims the batch, and the checker counts an overlap.
const (
	slowMarker = "slow-exclusive"
	// slowTail is three leases (the scenarios' lease is 2 s).
	slowTail    = 6 * time.Second
	slowRunTime = time.Minute
)

// stopMarker is a file in the scenario's directory: the publisher stops publishing when it
// appears (publishAfter the scenario's faults ended).
const stopMarker = "stop-publishing"

// slowRun is the work of an Exclusive run that started while slowMarker existed (see there).
func slowRun(ctx context.Context, marker string) error {
	limit := time.NewTimer(slowRunTime)
	defer limit.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-limit.C:
			return nil
		case <-tick.C:
		}
		if _, err := os.Stat(marker); err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-limit.C:
			return nil
		case <-time.After(slowTail):
			return nil
		}
	}
}

// event is one line of a worker's delivery log: "s" when a run starts (with its keys), "e"
// when it ends (with its outcome). Times are UnixNano of the machine's wall clock, which every
// process on it shares.
type event struct {
	Ev    string   `json:"ev"`
	Run   string   `json:"run"`
	Queue string   `json:"q,omitempty"`
	T     int64    `json:"t"`
	Keys  []string `json:"keys,omitempty"`
	OK    bool     `json:"ok,omitempty"`
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	d, err := time.ParseDuration(envOr(name, def.String()))
	if err != nil {
		return def
	}
	return d
}

func envInt(name string, def int) int {
	n, err := strconv.Atoi(envOr(name, strconv.Itoa(def)))
	if err != nil {
		return def
	}
	return n
}

// roleLogger logs warnings and errors to stderr, which the test keeps for a failure report.
func roleLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// openApp opens txmq for a role the way an app does: the backend and app database URLs come
// from the test, the timings are short so faults show within seconds.
func openApp(ctx context.Context, log *slog.Logger, drops *sync.Map) (*txmq.App, error) {
	lease := envDuration("CHAOS_LEASE", 2*time.Second)
	cfg := &txmq.Config{
		Backend:     os.Getenv("CHAOS_BACKEND"),
		DatabaseURL: os.Getenv("CHAOS_DATABASE_URL"),
		Schema:      os.Getenv("CHAOS_SCHEMA"),
		Logger:      log,
	}
	cfg.Node.Lease = lease
	cfg.Node.ClaimTimeout = lease
	cfg.Node.PollWait = 200 * time.Millisecond
	cfg.Node.Hooks = &txmq.Hooks{Dropped: func(queue, reason string, messages int) {
		v, _ := drops.LoadOrStore(queue+"/"+reason, new(atomic.Int64))
		v.(*atomic.Int64).Add(int64(messages))
	}}
	cfg.Node.Backoff = func(run int) time.Duration { return min(250*time.Millisecond<<min(run, 8), 2*time.Second) }
	cfg.Outbox.RecoveryAge = 2 * time.Second
	cfg.Outbox.SweepInterval = 500 * time.Millisecond
	cfg.Outbox.BackoffBase = time.Second
	cfg.Outbox.BackoffMax = 5 * time.Second
	cfg.Outbox.PublishTimeout = 5 * time.Second
	if h := envDuration("CHAOS_LEDGER_HORIZON", 0); h > 0 { // ledger mode
		cfg.Ledger = &ledger.Options{Mode: true, Horizon: h, RepublishInterval: 500 * time.Millisecond}
	}
	return txmq.Open(ctx, cfg)
}

// printDrops prints "drops queue/reason=N ..." on stdout for the test's report.
func printDrops(drops *sync.Map) {
	line := "drops"
	drops.Range(func(k, v any) bool {
		line += fmt.Sprintf(" %s=%d", k, v.(*atomic.Int64).Load())
		return true
	})
	fmt.Println(line)
}

// runWorker listens on both queues and logs every run to CHAOS_LOG until SIGTERM.
func runWorker() error {
	ctx := context.Background()
	log := roleLogger()
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGTERM, syscall.SIGINT)
	f, err := os.OpenFile(os.Getenv("CHAOS_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	var drops sync.Map
	app, err := openApp(ctx, log, &drops)
	if err != nil {
		return err
	}
	name := os.Getenv("CHAOS_NAME")
	var runs atomic.Int64
	var mu sync.Mutex
	write := func(e event) error {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		_, err = f.Write(append(b, '\n')) // one write per line: a kill -9 leaves whole lines
		return err
	}
	listener := func(queue string, work time.Duration) func(context.Context, []msg) error {
		return func(ctx context.Context, msgs []msg) error {
			run := fmt.Sprintf("%s-%d", name, runs.Add(1))
			keys := make([]string, len(msgs))
			for i, m := range msgs {
				keys[i] = m.K
			}
			if err := write(event{Ev: "s", Run: run, Queue: queue, T: time.Now().UnixNano(), Keys: keys}); err != nil {
				return err
			}
			var runErr error
			marker := filepath.Join(os.Getenv("CHAOS_DIR"), slowMarker)
			if _, err := os.Stat(marker); err == nil && queue == exclQueue.Name() {
				runErr = slowRun(ctx, marker)
			} else {
				select {
				case <-time.After(work):
				case <-ctx.Done():
					runErr = context.Cause(ctx)
				}
			}
			if err := write(event{Ev: "e", Run: run, T: time.Now().UnixNano(), OK: runErr == nil}); err != nil {
				return errors.Join(runErr, err)
			}
			return runErr
		}
	}
	if err := workQueue.Listen(app.Node, listener(workQueue.Name(), workRunTime)); err != nil {
		return err
	}
	if err := exclQueue.Listen(app.Node, listener(exclQueue.Name(), exclRunTime)); err != nil {
		return err
	}
	if err := app.Node.Start(ctx); err != nil {
		return err
	}
	fmt.Println("ready")
	<-quit
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = app.Close(cctx)
	printDrops(&drops)
	return err
}

// truth is one committed message of the ground truth table.
type truth struct {
	k, queue, mode string
	at             time.Time
}

// runPublisher publishes CHAOS_STEPS groups of five messages (fewer when stopMarker appears
// in CHAOS_DIR first), one group every CHAOS_EVERY,
// alternately in one outbox transaction (the ground truth rows in the same transaction) and
// immediately (the ground truth written right after each accepted publish, retried until the
// app database takes it). One message in five goes to the Exclusive queue. Then it closes and
// prints "done".
func runPublisher() error {
	ctx := context.Background()
	log := roleLogger()
	var drops sync.Map
	app, err := openApp(ctx, log, &drops)
	if err != nil {
		return err
	}
	schema := pgx.Identifier{app.Store.Schema()}.Sanitize()
	if _, err := app.Pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+schema+".chaos_committed (k text PRIMARY KEY, q text NOT NULL, mode text NOT NULL, at timestamptz NOT NULL)"); err != nil {
		return err
	}
	insert := "INSERT INTO " + schema + ".chaos_committed (k, q, mode, at) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) ON CONFLICT DO NOTHING"
	// The immediate half's ground truth: written by one goroutine, retried while the app
	// database is cut.
	var (
		pmu     sync.Mutex
		pending []truth
	)
	flushTruth := func() error {
		pmu.Lock()
		rows := pending
		pending = nil
		pmu.Unlock()
		if len(rows) == 0 {
			return nil
		}
		if err := execTruth(ctx, app.Pool.Exec, insert, rows); err != nil {
			pmu.Lock()
			pending = append(rows, pending...)
			pmu.Unlock()
			return err
		}
		return nil
	}
	stopTruth := make(chan struct{})
	truthDone := make(chan struct{})
	go func() {
		defer close(truthDone)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = flushTruth()
			case <-stopTruth:
				return
			}
		}
	}()

	fmt.Println("ready")
	steps, every := envInt("CHAOS_STEPS", 400), envDuration("CHAOS_EVERY", 25*time.Millisecond)
	stop := filepath.Join(os.Getenv("CHAOS_DIR"), stopMarker)
	var txOK, txFailed, immOK, immFailed int
	tick := time.NewTicker(every)
	defer tick.Stop()
	for step := range steps {
		<-tick.C
		if _, err := os.Stat(stop); err == nil {
			break // publishAfter the faults ended
		}
		group := make([]truth, 5)
		for j := range group {
			q := workQueue.Name()
			if j == 0 {
				q = exclQueue.Name()
			}
			group[j] = truth{k: fmt.Sprintf("s%d-%d", step, j), queue: q}
		}
		publish := func(ctx context.Context, tr truth) error {
			if tr.queue == exclQueue.Name() {
				return exclQueue.Publish(ctx, app.Node, msg{tr.k})
			}
			return workQueue.Publish(ctx, app.Node, msg{tr.k})
		}
		if step%2 == 0 {
			tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := app.Store.RunInTx(tctx, func(ctx context.Context, tx pgx.Tx) error {
				now := time.Now()
				for j := range group {
					group[j].mode, group[j].at = "tx", now
				}
				if err := execTruth(ctx, tx.Exec, insert, group); err != nil {
					return err
				}
				for _, tr := range group {
					if err := publish(ctx, tr); err != nil {
						return err
					}
				}
				return nil
			})
			cancel()
			if err != nil {
				txFailed++ // the keys are never reused: the table says whether it committed
				continue
			}
			txOK++
			continue
		}
		for _, tr := range group {
			if err := publish(ctx, tr); err != nil {
				immFailed++
				log.Warn("chaos publisher: immediate publish refused", "key", tr.k, "error", err)
				continue
			}
			tr.mode, tr.at = "immediate", time.Now()
			pmu.Lock()
			pending = append(pending, tr)
			pmu.Unlock()
			immOK++
		}
	}
	close(stopTruth)
	<-truthDone
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := flushTruth()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("writing the ground truth of accepted immediate publishes: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = app.Close(cctx)
	printDrops(&drops)
	fmt.Printf("done tx_ok=%d tx_failed=%d immediate_ok=%d immediate_failed=%d\n", txOK, txFailed, immOK, immFailed)
	return err
}

// execTruth inserts ground truth rows with exec (a pool's or a transaction's).
func execTruth(ctx context.Context, exec func(context.Context, string, ...any) (pgconn.CommandTag, error), insert string, rows []truth) error {
	ks, qs, ms, ats := make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows)), make([]time.Time, len(rows))
	for i, r := range rows {
		ks[i], qs[i], ms[i], ats[i] = r.k, r.queue, r.mode, r.at
	}
	_, err := exec(ctx, insert, ks, qs, ms, ats)
	return err
}

// runNATSServer runs nats-server v2.15 (the module in go.mod) with JetStream on
// 127.0.0.1:CHAOS_NATS_PORT, storing in CHAOS_NATS_DIR, until it is killed or gets SIGTERM.
// CHAOS_NATS_SYNC=always fsyncs every write (sync_interval: always).
func runNATSServer() error {
	port, err := strconv.Atoi(os.Getenv("CHAOS_NATS_PORT"))
	if err != nil {
		return fmt.Errorf("CHAOS_NATS_PORT: %w", err)
	}
	opts := &server.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: os.Getenv("CHAOS_NATS_DIR"),
		NoLog: true, NoSigs: true, SyncAlways: os.Getenv("CHAOS_NATS_SYNC") == "always",
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		return errors.New("nats-server not ready for connections after 30s")
	}
	fmt.Println("ready")
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGTERM, syscall.SIGINT)
	<-quit
	srv.Shutdown()
	srv.WaitForShutdown()
	return nil
}
