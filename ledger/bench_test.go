package ledger_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/sqljobs"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/testenv"
	"github.com/txmq/txmq/ledger"
)

type benchMsg struct {
	ID    int    `json:"id"`
	Email string `json:"email"`
}

// BenchmarkLedgerCost measures the ledger's cost on the whole path on SQL jobs: one node
// publishes b.N messages, 100 per PublishMany call and per batch, and waits until every one
// was delivered, with the ledger off, on, and on in ledger mode (each in a fresh schema of the
// test database). b.N counts messages; compare the msgs/s of "off", "on" and "mode" from one
// run.
func BenchmarkLedgerCost(b *testing.B) {
	for _, name := range []string{"off", "on", "mode"} {
		b.Run(name, func(b *testing.B) { benchLedger(b, name != "off", name == "mode") })
	}
}

func benchLedger(b *testing.B, on, mode bool) {
	ctx := context.Background()
	pool := testenv.PostgresPool(b)
	schema := testenv.PostgresSchema(b, pool)
	if err := sqljobs.Migrate(ctx, pool, &sqljobs.Options{Schema: schema}); err != nil {
		b.Fatal(err)
	}
	// The backend has a pool of its own, as one opened from TXMQ_BACKEND has; the ledger uses
	// the app's.
	be, err := sqljobs.New(ctx, testenv.PostgresPool(b), &sqljobs.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := &txmq.NodeOptions{Registry: txmq.NewRegistry(), Logger: logger, PollWait: 100 * time.Millisecond}
	var lg *ledger.Ledger
	if on {
		lo := &ledger.Options{Schema: schema, Logger: logger, Mode: mode}
		if err := ledger.Migrate(ctx, pool, lo); err != nil {
			b.Fatal(err)
		}
		if lg, err = ledger.New(pool, lo); err != nil {
			b.Fatal(err)
		}
		defer lg.Close(ctx)
		opts.Ledger = lg
	}
	q := txmq.MustDeclareIn(opts.Registry, "bench", txmq.QueueConfig[benchMsg]{Transactional: txmq.Try, MaxBatchMessages: 100})
	n, err := txmq.NewNode(be, opts)
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu        sync.Mutex
		seen      = map[string]bool{}
		got, want atomic.Int64
	)
	done := make(chan struct{}, 1)
	if err := q.Listen(n, func(ctx context.Context, msgs []benchMsg) error {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range txmq.MessageIDs(ctx) {
			seen[id] = true // distinct messages: a batch may run twice (at least once)
		}
		if got.Swap(int64(len(seen))) != want.Load() && int64(len(seen)) == want.Load() {
			done <- struct{}{}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = n.Close(ctx) }()
	want.Store(int64(b.N))
	msgs := make([]benchMsg, 100)
	for i := range msgs {
		msgs[i] = benchMsg{ID: i, Email: "someone@example.com"}
	}
	var walStart string
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&walStart); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for sent := 0; sent < b.N; sent += len(msgs) {
		if err := q.PublishMany(ctx, n, msgs[:min(len(msgs), b.N-sent)]); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("delivered %d of %d", got.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	// The write-ahead log written meanwhile, per message: the write amplification (the
	// database is shared, so other writers add noise; compare runs of one invocation).
	defer func() {
		var wal float64
		if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, walStart).Scan(&wal); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(wal/float64(b.N), "WAL-B/msg")
	}()
	if lg != nil {
		// Every message's completion reaches the table (checked outside the timing).
		// The last completions are recorded after their acks, a moment after the listener.
		deadline := time.Now().Add(30 * time.Second)
		for {
			ms, err := lg.ListMessages(ctx, core.MessageFilter{Queue: "bench", State: core.StateCompleted, Limit: b.N})
			if err == nil && len(ms) == b.N {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("ledger: %d completed rows, %v; want %d", len(ms), err, b.N)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if mode { // and every kept batch is settled
			for {
				k, err := lg.KeptBatches(ctx)
				if err == nil && k == 0 {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("ledger mode: %d batches still kept, %v; want 0", k, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}
