package outboxtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest"
)

// RunControl runs the control tables' tests on target, each a parallel subtest, several
// processes being several *sql.DB handles on one database (Env.Peer): pauses, schedule ticks,
// rate-limit buckets, node heartbeats, and a schedule run by two nodes through txmq.Open.
func RunControl(t *testing.T, target *Target) {
	t.Run("ControlTablesSet", func(t *testing.T) { testControlTablesSet(t, target) })
	t.Run("Pauses", func(t *testing.T) { testPauses(t, target) })
	t.Run("TickClaimedOnceAcrossProcesses", func(t *testing.T) { testTickClaimedOnceAcrossProcesses(t, target) })
	t.Run("LimitsShared", func(t *testing.T) { testLimitsShared(t, target) })
	t.Run("LimitsRefill", func(t *testing.T) { testLimitsRefill(t, target) })
	t.Run("Nodes", func(t *testing.T) { testNodes(t, target) })
	t.Run("ScheduleTwoNodes", func(t *testing.T) { testScheduleTwoNodes(t, target) })
}

// ControlTablesSet: a store on the target has Pauses, Ticks, Limits and Nodes (the dialect
// keeps them), as one on PostgreSQL does.
func testControlTablesSet(t *testing.T, target *Target) {
	t.Parallel()
	e := Setup(t, target, nil)
	if e.Store.Pauses() == nil || e.Store.Ticks() == nil || e.Store.Limits() == nil || e.Store.Nodes() == nil {
		t.Fatalf("Pauses %v, Ticks %v, Limits %v, Nodes %v: want all set", e.Store.Pauses(), e.Store.Ticks(), e.Store.Limits(), e.Store.Nodes())
	}
}

// Pauses: a pause written by one process is read by another; pausing again keeps the
// first mark; resuming removes it, and resuming a queue not paused does nothing.
func testPauses(t *testing.T, target *Target) {
	t.Parallel()
	e := Setup(t, target, nil)
	other := e.Peer(t)
	ctx := context.Background()
	before := target.Now(t, e.DB).UnixMicro()
	if err := e.Store.Pauses().Pause(ctx, "orders", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := other.Pauses().Pause(ctx, "orders", "bob"); err != nil {
		t.Fatal(err)
	}
	ps, err := other.Pauses().PausedQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := ps["orders"]
	if len(ps) != 1 || !ok || p.PausedBy != "alice" || p.PausedAt.UnixMicro() < before {
		t.Fatalf("PausedQueues = %+v, want orders paused by alice (the first mark) at or after %d", ps, before)
	}
	names, err := other.Pauses().Paused(ctx)
	if err != nil || !slices.Equal(names, []string{"orders"}) {
		t.Fatalf("Paused = %v, %v", names, err)
	}
	if err := other.Pauses().Resume(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := other.Pauses().Resume(ctx, "never-paused"); err != nil {
		t.Fatal(err)
	}
	if names, err := e.Store.Pauses().Paused(ctx); err != nil || len(names) != 0 {
		t.Fatalf("Paused after Resume = %v, %v", names, err)
	}
}

// TickClaimedOnceAcrossProcesses: four processes claim each of ten ticks of a schedule at
// once; each tick is claimed by exactly one of them, its message is staged with the claim and
// published once, and the schedule's last, next and recent ticks are recorded.
func testTickClaimedOnceAcrossProcesses(t *testing.T, target *Target) {
	t.Parallel()
	e := Setup(t, target, nil)
	stores := []*outbox.Store{e.Store, e.Peer(t), e.Peer(t), e.Peer(t)}
	ctx := context.Background()
	base := time.Unix(1_700_000_000, 0)
	const ticks = 10
	for i := range ticks {
		tick, next := base.Add(time.Duration(i)*time.Second), base.Add(time.Duration(i+1)*time.Second)
		var claimed atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, s := range stores {
			wg.Go(func() {
				<-start
				ok, err := s.Ticks().ClaimTick(ctx, "every-second", "orders", tick, next, func(ctx context.Context) error {
					return e.Orders.Publish(ctx, e.Node, Msg{i})
				})
				if err != nil {
					t.Errorf("ClaimTick(tick %d): %v", i, err)
				}
				if ok {
					claimed.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := claimed.Load(); n != 1 {
			t.Fatalf("tick %d claimed %d times, want once", i, n)
		}
	}
	want := make([]int, ticks)
	for i := range want {
		want[i] = i
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool { return len(e.Backend.Messages(t, "orders")) >= ticks }, "every tick's message published")
	for _, s := range stores {
		_ = s.WaitIdle(ctx)
	}
	got := e.Backend.Messages(t, "orders")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("published %v, want each tick once: %v", got, want)
	}
	last, err := stores[2].Ticks().LastTick(ctx, "every-second")
	if err != nil || !last.Equal(base.Add((ticks-1)*time.Second)) {
		t.Fatalf("LastTick = %v, %v", last, err)
	}
	rows, err := stores[1].Ticks().Schedules(ctx)
	if err != nil || len(rows) != 1 || rows[0].Queue != "orders" || !rows[0].NextTick.Equal(base.Add(ticks*time.Second)) {
		t.Fatalf("Schedules = %+v, %v", rows, err)
	}
	recent, err := e.Store.Ticks().Recent(ctx, "every-second", 3)
	if err != nil || len(recent) != 3 || !recent[0].Equal(last) || !recent[2].Equal(last.Add(-2*time.Second)) {
		t.Fatalf("Recent = %v, %v", recent, err)
	}
	// A tick claimed before its last one does not move the last tick back.
	if ok, err := e.Store.Ticks().ClaimTick(ctx, "every-second", "orders", base.Add(-time.Hour), base, func(context.Context) error { return nil }); !ok || err != nil {
		t.Fatalf("ClaimTick(an older tick) = %v, %v", ok, err)
	}
	if l, err := e.Store.Ticks().LastTick(ctx, "every-second"); err != nil || !l.Equal(last) {
		t.Fatalf("LastTick after an older claim = %v, %v; want %v", l, err, last)
	}
	// Ticks older than a day are pruned by the next claim.
	old := base.Add(-48 * time.Hour)
	if ok, err := e.Store.Ticks().ClaimTick(ctx, "every-second", "orders", old, base, func(context.Context) error { return nil }); !ok || err != nil {
		t.Fatalf("ClaimTick(old) = %v, %v", ok, err)
	}
	if ok, err := e.Store.Ticks().ClaimTick(ctx, "every-second", "orders", base.Add(ticks*time.Second), time.Time{}, func(context.Context) error { return nil }); !ok || err != nil {
		t.Fatalf("ClaimTick = %v, %v", ok, err)
	}
	var n int
	if err := e.DB.QueryRow("SELECT COUNT(*) FROM "+e.Table("txmq_schedule_ticks")+" WHERE tick = ?", old.UnixMicro()).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a tick older than a day kept (%d rows, %v)", n, err)
	}
}

// LimitsShared: three processes take from one bucket at once: together they get exactly
// its burst (the refill of 1 token an hour adds nothing), then nothing with a wait until the
// next token; tokens given back are taken again, up to the burst.
func testLimitsShared(t *testing.T, target *Target) {
	t.Parallel()
	e := Setup(t, target, nil)
	stores := []*outbox.Store{e.Store, e.Peer(t), e.Peer(t)}
	ctx := context.Background()
	limit := core.RateLimit{Batches: 1, Per: time.Hour, Burst: 10}
	var got atomic.Int64
	var wg sync.WaitGroup
	for i := range 24 {
		s := stores[i%len(stores)]
		wg.Go(func() {
			n, wait, err := s.Limits().Take(ctx, "orders", 1+i%3, limit)
			if err != nil {
				t.Errorf("Take: %v", err)
			}
			if n == 0 && wait <= 0 {
				t.Errorf("Take got none and no wait")
			}
			got.Add(int64(n))
		})
	}
	wg.Wait()
	if n := got.Load(); n != int64(limit.Burst) {
		t.Fatalf("three processes took %d tokens of a bucket of %d refilled once an hour, want exactly the burst", n, limit.Burst)
	}
	n, wait, err := stores[1].Limits().Take(ctx, "orders", 1, limit)
	if err != nil || n != 0 || wait < 59*time.Minute || wait > time.Hour {
		t.Fatalf("Take from an empty bucket = %d, %v, %v; want 0 and a wait of about an hour", n, wait, err)
	}
	if err := stores[2].Limits().Return(ctx, "orders", 3, limit); err != nil {
		t.Fatal(err)
	}
	if n, _, err := e.Store.Limits().Take(ctx, "orders", 5, limit); err != nil || n != 3 {
		t.Fatalf("Take after 3 given back = %d, %v; want 3", n, err)
	}
	if err := e.Store.Limits().Return(ctx, "orders", 50, limit); err != nil {
		t.Fatal(err)
	}
	if n, _, err := e.Store.Limits().Take(ctx, "orders", 50, limit); err != nil || n != limit.Burst {
		t.Fatalf("Take after more than the burst given back = %d, %v; want the burst %d", n, err, limit.Burst)
	}
}

// LimitsRefill: a bucket emptied refills at its rate on the store's clock (the database's or the machine's).
func testLimitsRefill(t *testing.T, target *Target) {
	t.Parallel()
	e := Setup(t, target, nil)
	ctx := context.Background()
	limit := core.RateLimit{Batches: 20, Per: time.Second, Burst: 2}
	if n, _, err := e.Store.Limits().Take(ctx, "orders", 5, limit); err != nil || n != 2 {
		t.Fatalf("Take from a new bucket = %d, %v; want the burst", n, err)
	}
	n, wait, err := e.Store.Limits().Take(ctx, "orders", 1, limit)
	if err != nil || n != 0 || wait <= 0 || wait > 50*time.Millisecond {
		t.Fatalf("Take from an empty bucket = %d, %v, %v; want 0 and a wait of at most 50 ms", n, wait, err)
	}
	var total int
	txmqtest.Eventually(t, 10*time.Second, func() bool {
		n, _, err := e.Store.Limits().Take(ctx, "orders", 1, limit)
		if err != nil {
			t.Fatal(err)
		}
		total += n
		return total >= 2
	}, "the bucket refilled")
}

// Nodes: heartbeats of two processes are listed by either, most recent first, with their
// queues, on the store's clock (the database's or the machine's); a beat replaces its node's row; rows older than
// NodeRetention are deleted by the next beat.
func testNodes(t *testing.T, target *Target) {
	t.Parallel()
	e := Setup(t, target, nil)
	other := e.Peer(t)
	ctx := context.Background()
	started := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	beat := func(s *outbox.Store, node string, inUse int, stopped bool) {
		t.Helper()
		if err := s.Nodes().Beat(ctx, core.NodeBeat{Node: node, Version: "v1", StartedAt: started, Every: 5 * time.Second, Stopped: stopped,
			Queues: []core.NodeQueue{{Queue: "orders", InUse: inUse, Cap: 4}}}); err != nil {
			t.Fatal(err)
		}
	}
	beat(e.Store, "n1", 1, false)
	beat(other, "n2", 2, false)
	beat(e.Store, "n1", 3, true)
	if _, err := e.DB.Exec("INSERT INTO "+e.Table("txmq_nodes")+" (node, queues, started_at, every_ms, last_seen) VALUES ('gone', '[]', 0, 5000, ?)",
		time.Now().Add(-outbox.NodeRetention-time.Hour).UnixMicro()); err != nil {
		t.Fatal(err)
	}
	beat(other, "n2", 2, false)
	list, now, err := e.Store.Nodes().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Node != "n2" || list[1].Node != "n1" {
		t.Fatalf("List = %+v, want n2 then n1 (most recently seen first), the old row pruned", list)
	}
	n1 := list[1]
	if !n1.Stopped || n1.Version != "v1" || !n1.StartedAt.Equal(started) || n1.Every != 5*time.Second ||
		len(n1.Queues) != 1 || n1.Queues[0].InUse != 3 || n1.Queues[0].Cap != 4 {
		t.Fatalf("n1 = %+v, want its last beat", n1)
	}
	if age := now.Sub(list[0].LastSeen); age < 0 || age > time.Minute {
		t.Fatalf("n2 last seen %v before the database's now %v", age, now)
	}
	if err := e.Store.Nodes().Beat(ctx, core.NodeBeat{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("Beat without a node id = %v", err)
	}
}

// ScheduleTwoNodes: two nodes on the same app database run a schedule ticking every second through txmq.Open's wiring; each tick is published once, on a Never queue too.
func testScheduleTwoNodes(t *testing.T, target *Target) {
	t.Parallel()
	db := target.Open(t)
	ctx := context.Background()
	reg := txmq.NewRegistry()
	q := Must(txmq.DeclareIn(reg, "ticks", txmq.QueueConfig[Msg]{Transactional: txmq.Never}))
	if err := q.Schedule("every-second", txmq.ScheduleConfig[Msg]{Cron: "@every 1s", Messages: func(tick time.Time) []Msg {
		return []Msg{{N: int(tick.Unix())}}
	}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[int]int{}
	var apps []*txmq.App
	for range 2 {
		cfg := &txmq.Config{Backend: "memory://", Logger: Quiet, Node: txmq.NodeOptions{Registry: reg}}
		target.Config(t, db.Name, false, cfg)
		app, err := txmq.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = app.Close(context.Background()) })
		apps = append(apps, app)
	}
	// One listener: the memory backend is per app, and each tick is published through the
	// outbox of the app that claimed it.
	for _, app := range apps {
		if err := q.Listen(app.Node, func(_ context.Context, msgs []Msg) error {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				seen[m.N]++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := app.Node.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	txmqtest.Eventually(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= 4
	}, "four ticks delivered")
	for _, app := range apps {
		if err := app.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for tick, n := range seen {
		if n != 1 {
			t.Errorf("tick %d delivered %d times across two nodes, want once", tick, n)
		}
	}
}
