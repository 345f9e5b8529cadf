package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// fakeControl is a Dialect keeping the control tables in memory (ControlDialect). Only what
// NewWithDialect and the control tables use is implemented: the embedded nil Dialect panics
// for the rest, and ClaimPage finds no rows (the relay pass a claimed tick wakes).
type fakeControl struct {
	outbox.Dialect
	none bool // its table constructors return nil

	mu      sync.Mutex
	pauses  map[string]outbox.PausedQueue
	ticks   map[string]bool // "schedule@unix"
	last    map[string]time.Time
	pruned  time.Time
	tokens  float64
	nodes   []outbox.NodeRow
	claimed atomic.Int32 // ClaimPage calls
}

func newFakeControl() *fakeControl {
	return &fakeControl{pauses: map[string]outbox.PausedQueue{}, ticks: map[string]bool{}, last: map[string]time.Time{}, tokens: 0.5}
}

func (f *fakeControl) Name() string                         { return "fake" }
func (f *fakeControl) Schema() string                       { return "app" }
func (f *fakeControl) Tables() (outbox string, dead string) { return "app.outbox", "app.dead" }
func (f *fakeControl) ClaimPage(context.Context, int64, time.Duration, int, func(outbox.PageTx, []outbox.Row) error) error {
	f.claimed.Add(1)
	return nil
}

func (f *fakeControl) PauseTable() outbox.PauseTable {
	if f.none {
		return nil
	}
	return fakePauses{f}
}

func (f *fakeControl) TickTable() outbox.TickTable {
	if f.none {
		return nil
	}
	return fakeTicks{f}
}

func (f *fakeControl) RateTable() outbox.RateTable {
	if f.none {
		return nil
	}
	return fakeRates{f}
}

func (f *fakeControl) NodeTable() outbox.NodeTable {
	if f.none {
		return nil
	}
	return fakeNodes{f}
}

type fakePauses struct{ f *fakeControl }

func (p fakePauses) Pause(_ context.Context, queue, by string) error {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	if _, ok := p.f.pauses[queue]; !ok {
		p.f.pauses[queue] = outbox.PausedQueue{Queue: queue, PausedBy: by, PausedAt: time.Now()}
	}
	return nil
}

func (p fakePauses) Resume(_ context.Context, queue string) error {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	delete(p.f.pauses, queue)
	return nil
}

func (p fakePauses) PausedQueues(context.Context) ([]outbox.PausedQueue, error) {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	var out []outbox.PausedQueue
	for _, q := range p.f.pauses {
		out = append(out, q)
	}
	return out, nil
}

// fakeTicks runs a tick transaction on a copy of the tables, kept when fn returns nil.
type fakeTicks struct{ f *fakeControl }

type fakeTickTx struct {
	ticks map[string]bool
	last  map[string]time.Time
}

func (t *fakeTickTx) Tx() *sql.Tx { return nil }

func (t *fakeTickTx) Claim(_ context.Context, schedule string, tick time.Time) (bool, error) {
	k := schedule + "@" + tick.UTC().Format(time.RFC3339Nano)
	if t.ticks[k] {
		return false, nil
	}
	t.ticks[k] = true
	return true, nil
}

func (t *fakeTickTx) Record(_ context.Context, schedule, _ string, tick, _ time.Time) error {
	if tick.After(t.last[schedule]) {
		t.last[schedule] = tick
	}
	return nil
}

func (t fakeTicks) InTickTx(ctx context.Context, fn func(context.Context, outbox.TickTx) error) error {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	tx := &fakeTickTx{ticks: map[string]bool{}, last: map[string]time.Time{}}
	for k, v := range t.f.ticks {
		tx.ticks[k] = v
	}
	for k, v := range t.f.last {
		tx.last[k] = v
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	t.f.ticks, t.f.last = tx.ticks, tx.last
	return nil
}

func (t fakeTicks) LastTick(_ context.Context, schedule string) (time.Time, error) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.f.last[schedule], nil
}

func (t fakeTicks) Recent(context.Context, string, int) ([]time.Time, error) { return nil, nil }
func (t fakeTicks) Schedules(context.Context) ([]outbox.ScheduleRow, error) {
	return nil, nil
}

func (t fakeTicks) Prune(_ context.Context, _ string, before time.Time) error {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.f.pruned = before
	return nil
}

// fakeRates has one bucket holding f.tokens, never refilled.
type fakeRates struct{ f *fakeControl }

func (r fakeRates) Take(_ context.Context, _ string, want, _ int, _ float64) (int, float64, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	got := min(want, int(r.f.tokens))
	r.f.tokens -= float64(got)
	return got, r.f.tokens, nil
}

func (r fakeRates) Return(_ context.Context, _ string, n, burst int, _ float64) error {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	r.f.tokens = min(float64(burst), r.f.tokens+float64(n))
	return nil
}

type fakeNodes struct{ f *fakeControl }

func (n fakeNodes) Beat(_ context.Context, r outbox.NodeRow, _ time.Duration) error {
	n.f.mu.Lock()
	defer n.f.mu.Unlock()
	n.f.nodes = append(n.f.nodes, r)
	return nil
}

func (n fakeNodes) List(context.Context) ([]outbox.NodeRow, time.Time, error) {
	n.f.mu.Lock()
	defer n.f.mu.Unlock()
	return append([]outbox.NodeRow(nil), n.f.nodes...), time.Unix(1000, 0), nil
}

// nopBackend is a backend NewWithDialect accepts; the control tables never publish.
type nopBackend struct{ core.Backend }

func newControlStore(t *testing.T, d outbox.Dialect) *outbox.Store {
	t.Helper()
	s, err := outbox.NewWithDialect(d, &outbox.Options{Backend: nopBackend{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// TestControlDialectWiring: a store of a dialect keeping the control tables hands out Pauses,
// Ticks, Limits and Nodes; one whose constructors return nil, or a dialect without
// ControlDialect, hands out nil ones, as before.
func TestControlDialectWiring(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		d    outbox.Dialect
		set  bool
	}{
		{"control dialect", newFakeControl(), true},
		{"control dialect keeping none", &fakeControl{none: true}, false},
		{"plain dialect", struct{ outbox.Dialect }{newFakeControl()}, false}, // only Dialect's methods
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newControlStore(t, tc.d)
			got := []bool{s.Pauses() != nil, s.Ticks() != nil, s.Limits() != nil, s.Nodes() != nil}
			for i, ok := range got {
				if ok != tc.set {
					t.Errorf("table %d (Pauses, Ticks, Limits, Nodes) set = %v, want %v", i, ok, tc.set)
				}
			}
		})
	}
}

// TestControlTicks: on a dialect's tables a tick is claimed once; publish runs in the claim's
// transaction (its ctx carries a core.Tx); a failed publish leaves the tick unclaimed; a
// claim wakes a relay pass and prunes the ticks older than a day.
func TestControlTicks(t *testing.T) {
	t.Parallel()
	f := newFakeControl()
	s := newControlStore(t, f)
	ctx := context.Background()
	tick := time.Unix(1_700_000_000, 0)
	boom := errors.New("publish failed")
	ok, err := s.Ticks().ClaimTick(ctx, "s", "q", tick, tick.Add(time.Minute), func(context.Context) error { return boom })
	if ok || !errors.Is(err, boom) {
		t.Fatalf("ClaimTick with a failing publish = %v, %v; want false and its error", ok, err)
	}
	var inTx bool
	ok, err = s.Ticks().ClaimTick(ctx, "s", "q", tick, tick.Add(time.Minute), func(ctx context.Context) error {
		_, inTx = core.TxFromContext(ctx)
		return nil
	})
	if !ok || err != nil || !inTx {
		t.Fatalf("ClaimTick = %v, %v (publish in a transaction: %v); want the claim, publishing in its transaction", ok, err, inTx)
	}
	ran := false
	ok, err = s.Ticks().ClaimTick(ctx, "s", "q", tick, tick.Add(time.Minute), func(context.Context) error { ran = true; return nil })
	if ok || err != nil || ran {
		t.Fatalf("ClaimTick of a claimed tick = %v, %v (publish ran: %v); want false without publishing", ok, err, ran)
	}
	if last, err := s.Ticks().LastTick(ctx, "s"); err != nil || !last.Equal(tick) {
		t.Fatalf("LastTick = %v, %v", last, err)
	}
	f.mu.Lock()
	pruned := f.pruned
	f.mu.Unlock()
	if !pruned.Equal(tick.Add(-24 * time.Hour)) {
		t.Fatalf("pruned before %v, want a day before the tick", pruned)
	}
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if f.claimed.Load() == 0 {
		t.Fatal("the claim woke no relay pass")
	}
}

// TestControlLimitsAndNodes: a take that gets nothing waits until the next whole token at the
// limit's rate; heartbeats go through as JSON and come back decoded.
func TestControlLimitsAndNodes(t *testing.T) {
	t.Parallel()
	s := newControlStore(t, newFakeControl())
	ctx := context.Background()
	limit := core.RateLimit{Batches: 10, Per: time.Second, Burst: 5}
	got, wait, err := s.Limits().Take(ctx, "q", 3, limit)
	if err != nil || got != 0 || wait != 50*time.Millisecond {
		t.Fatalf("Take from half a token = %d, %v, %v; want 0 and 50 ms at 10/s", got, wait, err)
	}
	if err := s.Limits().Return(ctx, "q", 2, limit); err != nil {
		t.Fatal(err)
	}
	if got, wait, err := s.Limits().Take(ctx, "q", 3, limit); err != nil || got != 2 || wait != 0 {
		t.Fatalf("Take after 2 given back = %d, %v, %v", got, wait, err)
	}
	beat := core.NodeBeat{Node: "n1", Every: time.Second, Queues: []core.NodeQueue{{Queue: "q", InUse: 2, Cap: 3}}}
	if err := s.Nodes().Beat(ctx, beat); err != nil {
		t.Fatal(err)
	}
	list, now, err := s.Nodes().List(ctx)
	if err != nil || len(list) != 1 || !now.Equal(time.Unix(1000, 0)) || len(list[0].Queues) != 1 || list[0].Queues[0].InUse != 2 || list[0].Queues[0].Cap != 3 {
		t.Fatalf("List = %+v, %v, %v", list, now, err)
	}
	if err := s.Pauses().Pause(ctx, "q", "a"); err != nil {
		t.Fatal(err)
	}
	if names, err := s.Pauses().Paused(ctx); err != nil || len(names) != 1 || names[0] != "q" {
		t.Fatalf("Paused = %v, %v", names, err)
	}
}
