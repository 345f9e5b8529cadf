package sqljobs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
)

// TestGroupedSettlesReportEachOutcome settles many claims at once, half of them with a stale
// handle (the lease ran out and another node re-claimed the batch): the Acks and Drops share
// statements, yet each returns its own claim's outcome.
func TestGroupedSettlesReportEachOutcome(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	tr := &countingTracer{}
	a := w.backendOn(w.pool(tr), &Options{SettleWindow: 20 * time.Millisecond})
	b := w.backend(nil)
	const n = 40
	publishN(t, a, "q", n)
	short := fetch(t, a, 300*time.Millisecond, core.QueueSlots{Queue: "q", Free: n / 2})
	long := fetch(t, a, 30*time.Second, core.QueueSlots{Queue: "q", Free: n / 2})
	if len(short) != n/2 || len(long) != n/2 {
		t.Fatalf("claimed %d and %d", len(short), len(long))
	}
	time.Sleep(400 * time.Millisecond)
	again := fetch(t, b, 30*time.Second, all("q")) // the short leases ran out: b holds them now
	if len(again) != n/2 {
		t.Fatalf("re-claimed %d, want %d", len(again), n/2)
	}

	before := tr.n.Load()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, c := range append(append([]*core.Claim{}, short...), long...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				errs[i] = a.Ack(ctxT(t), c)
			} else {
				errs[i] = a.Drop(ctxT(t), c, core.ReasonDeliveryExhausted)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i < n/2 && !errors.Is(err, core.ErrLeaseLost) {
			t.Errorf("stale settle %d: %v, want ErrLeaseLost", i, err)
		}
		if i >= n/2 && err != nil {
			t.Errorf("settle %d: %v, want nil", i, err)
		}
	}
	if stmts := tr.n.Load() - before; stmts >= n/2 {
		t.Errorf("%d concurrent settles ran %d statements; want them grouped", n, stmts)
	}
	// Settling again is a no-op for the held ones and still lease-lost for the stale ones.
	for i, c := range append(append([]*core.Claim{}, short...), long...) {
		err := a.Ack(ctxT(t), c)
		if i < n/2 && !errors.Is(err, core.ErrLeaseLost) || i >= n/2 && err != nil {
			t.Errorf("second ack %d: %v", i, err)
		}
	}
	if d := depth(t, a, "q"); d != (core.Depth{InFlight: n / 2}) {
		t.Fatalf("depth = %+v, want only b's %d in flight", d, n/2)
	}
	// b's claims are untouched and extend in one group too.
	before = tr.n.Load()
	for _, c := range again {
		wg.Add(1)
		go func() {
			defer wg.Done()
			old := c.LeaseUntil
			if err := a.Extend(ctxT(t), c, time.Minute); err != nil || !c.LeaseUntil.After(old) {
				t.Errorf("extend %s: %v (lease %v -> %v)", c.ID, err, old, c.LeaseUntil)
			}
		}()
	}
	wg.Wait()
	if stmts := tr.n.Load() - before; stmts >= n/2 {
		t.Errorf("%d concurrent extends ran %d statements; want them grouped", n/2, stmts)
	}
	for _, c := range again {
		if err := b.Ack(ctxT(t), c); err != nil {
			t.Fatalf("ack %s: %v", c.ID, err)
		}
	}
}

// TestGroupedSettleCallerGivesUp: a caller whose context ends while its settle waits in a
// round returns the context's error; the round still settles its claim, and a later Ack of
// the claim is a no-op rather than a lease-lost error.
func TestGroupedSettleCallerGivesUp(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(&Options{SettleWindow: 300 * time.Millisecond})
	publishN(t, be, "q", 3)
	cs := fetch(t, be, 30*time.Second, all("q"))
	if len(cs) != 3 {
		t.Fatalf("claimed %d", len(cs))
	}
	// Hold a statement of the group in flight: the Ack of cs[0], whose row another transaction
	// locks. The Ack of cs[1] then leads a round that gathers for the window, and the Ack of
	// cs[2] joins it.
	lock, err := w.admin.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(context.Background()) }()
	if _, err := lock.Exec(ctxT(t), `SELECT 1 FROM `+pgx.Identifier{w.schema}.Sanitize()+`.txmq_jobs WHERE batch_id = $1 FOR UPDATE`, cs[0].ID); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, c := range cs[:2] {
		wg.Go(func() {
			if err := be.Ack(ctxT(t), c); err != nil {
				t.Errorf("ack %s: %v", c.ID, err)
			}
		})
		time.Sleep(50 * time.Millisecond) // the first is blocked, the second gathering
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err = be.Ack(ctx, cs[2])
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("abandoned ack: %v, want the context's error", err)
	}
	if err := lock.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for depth(t, be, "q") != (core.Depth{}) {
		if time.Now().After(deadline) {
			t.Fatalf("depth = %+v, want empty", depth(t, be, "q"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := be.Ack(ctxT(t), cs[2]); err != nil {
		t.Fatalf("ack after the abandoned one: %v", err)
	}
}

// TestGroupingOff: SettleWindow < 0 runs one statement per settle.
func TestGroupingOff(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	tr := &countingTracer{}
	be := w.backendOn(w.pool(tr), &Options{SettleWindow: -1})
	publishN(t, be, "q", 5)
	cs := fetch(t, be, 30*time.Second, all("q"))
	before := tr.n.Load()
	for _, c := range cs {
		if err := be.Ack(ctxT(t), c); err != nil {
			t.Fatal(err)
		}
	}
	if got := tr.n.Load() - before; got != int64(len(cs)) {
		t.Fatalf("%d acks ran %d statements", len(cs), got)
	}
}

// TestAsyncCommitStaysInItsTransaction: claims and settles commit with synchronous_commit
// off (unless DurableSettles), and the setting never leaks into the pooled session.
func TestAsyncCommitStaysInItsTransaction(t *testing.T) {
	t.Parallel()
	for _, durable := range []bool{false, true} {
		w := newWorld(t)
		cfg, err := pgxpool.ParseConfig(w.url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 1 // every statement on the one session
		// The session starts with synchronous_commit on whatever the server's default (a
		// throwaway test server may run with it off), so a leak shows as "off".
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		// The server's own setting (a test server may run with synchronous_commit off):
		// whatever it is, the backend's statements must leave it as they found it.
		var want string
		if err := pool.QueryRow(ctxT(t), "SHOW synchronous_commit").Scan(&want); err != nil {
			t.Fatal(err)
		}
		if want == "off" {
			if _, err := pool.Exec(ctxT(t), "SET synchronous_commit = on"); err != nil {
				t.Fatal(err)
			}
			want = "on"
		}
		be := w.backendOn(pool, &Options{DurableSettles: durable})
		publishN(t, be, "q", 2)
		cs := fetch(t, be, 30*time.Second, all("q"))
		if err := be.Extend(ctxT(t), cs[0], time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := be.Ack(ctxT(t), cs[0]); err != nil {
			t.Fatal(err)
		}
		if err := be.Drop(ctxT(t), cs[1], core.ReasonDeliveryExhausted); err != nil {
			t.Fatal(err)
		}
		var setting string
		if err := pool.QueryRow(ctxT(t), "SHOW synchronous_commit").Scan(&setting); err != nil {
			t.Fatal(err)
		}
		if setting != want {
			t.Fatalf("durable=%v: the session's synchronous_commit is %q after claims and settles, want %q as before", durable, setting, want)
		}
		if d := depth(t, be, "q"); d != (core.Depth{}) {
			t.Fatalf("durable=%v: depth %+v", durable, d)
		}
	}
}

// TestSettleWithCancelledContext: a settle whose context has already ended does nothing and
// says so, as before grouping; the claim can still be settled with a live context.
func TestSettleWithCancelledContext(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	publishN(t, be, "q", 1)
	c := fetch(t, be, 30*time.Second, all("q"))[0]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := be.Ack(ctx, c); !errors.Is(err, context.Canceled) {
		t.Fatalf("ack with a cancelled context: %v, want context.Canceled", err)
	}
	if err := be.Extend(ctx, c, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("extend with a cancelled context: %v, want context.Canceled", err)
	}
	if d := depth(t, be, "q"); d != (core.Depth{InFlight: 1}) {
		t.Fatalf("depth after the refused ack = %+v, want the batch still in flight", d)
	}
	if err := be.Ack(ctxT(t), c); err != nil {
		t.Fatalf("ack: %v", err)
	}
}
