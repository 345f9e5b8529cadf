package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/txmqtest/testenv"
)

func open(t *testing.T, o ledger.Options) *ledger.Ledger {
	t.Helper()
	pool := testenv.PostgresPool(t)
	o.Schema = testenv.PostgresSchema(t, pool)
	ctx := context.Background()
	if err := ledger.Migrate(ctx, pool, &o); err != nil {
		t.Fatal(err)
	}
	if err := ledger.Migrate(ctx, pool, &o); err != nil { // again: a no-op
		t.Fatal(err)
	}
	l, err := ledger.New(pool, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

// idKinds are the two kinds of message ids the ledger stores differently: ids a caller chose
// (a row each) and ids made by core.NewID (found through their batch's row). Each returns the
// id a test's name for a message stands for.
var idKinds = []struct {
	name string
	ids  func() func(string) string
}{
	{"caller ids", func() func(string) string { return func(n string) string { return n } }},
	{"NewID ids", func() func(string) string {
		m := map[string]string{}
		return func(n string) string {
			if m[n] == "" {
				m[n] = core.NewID()
			}
			return m[n]
		}
	}},
}

// idList maps names to ids.
func idList(id func(string) string, names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = id(n)
	}
	return out
}

func state(t *testing.T, l *ledger.Ledger, id string) core.MessageInfo {
	t.Helper()
	m, err := l.GetMessage(context.Background(), id)
	if err != nil {
		t.Fatalf("GetMessage(%s): %v", id, err)
	}
	return m
}

// TestOrdering: a row never moves back to an older event, whether the events come in one
// group or in several; a cancelled row takes only a completion; the publish time is the
// earliest recorded.
func TestOrdering(t *testing.T) {
	t.Parallel()
	l := open(t, ledger.Options{})
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	at := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Second) }
	ev := func(id string, s core.MessageState, sec int) core.MessageInfo {
		return core.MessageInfo{ID: id, Queue: "q", State: s, UpdatedAt: at(sec), PublishedAt: at(sec)}
	}
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		groups [][]core.MessageInfo
		want   core.MessageState
	}{
		{"late publish in a later group", [][]core.MessageInfo{{ev("a", core.StateRunning, 2)}, {ev("a", core.StateQueued, 1)}}, core.StateRunning},
		{"late publish in one group", [][]core.MessageInfo{{ev("b", core.StateRunning, 2), ev("b", core.StateQueued, 1)}}, core.StateRunning},
		{"in order", [][]core.MessageInfo{{ev("c", core.StateQueued, 1)}, {ev("c", core.StateRunning, 2)}, {ev("c", core.StateCompleted, 3)}}, core.StateCompleted},
		{"cancelled keeps out a retry", [][]core.MessageInfo{{ev("d", core.StateCancelled, 2)}, {ev("d", core.StateRetry, 3)}}, core.StateCancelled},
		{"cancelled takes a completion", [][]core.MessageInfo{{ev("e", core.StateCancelled, 2), ev("e", core.StateCompleted, 3)}}, core.StateCompleted},
	} {
		for _, g := range tt.groups {
			l.RecordMessages(g)
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		id := tt.groups[0][0].ID
		m := state(t, l, id)
		if m.State != tt.want {
			t.Errorf("%s: state %s, want %s", tt.name, m.State, tt.want)
		}
		if !m.PublishedAt.Equal(at(1)) && tt.groups[0][0].State != core.StateCancelled {
			t.Errorf("%s: published %v, want the earliest event %v", tt.name, m.PublishedAt, at(1))
		}
	}
	if _, err := l.GetMessage(ctx, "nope"); !errors.Is(err, core.ErrMessageNotFound) {
		t.Errorf("GetMessage of an unknown id: %v", err)
	}
	if _, err := l.CancelMessage(ctx, "c"); !errors.Is(err, core.ErrNotCancellable) {
		t.Errorf("CancelMessage of a completed message: %v", err)
	}
	got, err := l.CancelledMessages(ctx, core.CancelCheck{Queue: "q", Created: t0, IDs: []string{"a", "d", "e", "zz"}})
	if err != nil || len(got) != 1 || !got["d"] {
		t.Errorf("CancelledMessages = %v, %v; want only d", got, err)
	}
}

// TestPrune: completed and cancelled rows past the retention go, in bounded deletes; dead,
// running and recent rows stay.
func TestPrune(t *testing.T) {
	t.Parallel()
	l := open(t, ledger.Options{Retention: time.Hour, PruneBatch: 2, NoPrune: true})
	old, recent := time.Now().Add(-2*time.Hour), time.Now()
	var evs []core.MessageInfo
	for i, s := range []core.MessageState{core.StateCompleted, core.StateCompleted, core.StateCompleted, core.StateCancelled, core.StateCompleted, core.StateDead, core.StateRunning} {
		evs = append(evs, core.MessageInfo{ID: string(rune('a' + i)), Queue: "q", State: s, UpdatedAt: old})
	}
	evs = append(evs, core.MessageInfo{ID: "fresh", Queue: "q", State: core.StateCompleted, UpdatedAt: recent})
	l.RecordMessages(evs)
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, err := l.Prune(context.Background())
	if err != nil || n != 5 {
		t.Fatalf("Prune = %d, %v; want the 5 old completed and cancelled rows", n, err)
	}
	left, err := l.ListMessages(context.Background(), core.MessageFilter{})
	if err != nil || len(left) != 3 {
		t.Fatalf("left: %+v, %v; want the dead, running and fresh rows", left, err)
	}
}

// TestOptions: negative settings are errors naming the setting.
func TestOptions(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	for _, o := range []ledger.Options{{Retention: -1}, {FlushSize: -1}, {Schema: "bad name"}, {Horizon: -1}, {MaxRepublish: -1}} {
		if _, err := ledger.New(pool, &o); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v; want ErrInvalidConfig", o, err)
		}
	}
	if _, err := ledger.New(nil, nil); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("New(nil pool) = %v", err)
	}
}

// TestCancelSeenAcrossProcesses: a node's ledger answers CancelledMessages from memory, and a
// cancel made through another Ledger (another process) is seen by it once CancelMessage
// returned.
func TestCancelSeenAcrossProcesses(t *testing.T) {
	t.Parallel()
	node := open(t, ledger.Options{CancelCheck: 50 * time.Millisecond})
	ctx := context.Background()
	published := time.Now()
	node.RecordMessages([]core.MessageInfo{{ID: "x", Queue: "q", State: core.StateQueued, UpdatedAt: published}})
	if err := node.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 { // starts the reader; its reads come while the loop below runs
		if got, err := node.CancelledMessages(ctx, core.CancelCheck{Queue: "q", Created: published, IDs: []string{"x"}}); err != nil || len(got) != 0 {
			t.Fatalf("CancelledMessages before the cancel = %v, %v", got, err)
		}
		time.Sleep(60 * time.Millisecond)
	}
	other, err := ledger.New(testenv.PostgresPool(t), &ledger.Options{Schema: node.Schema(), CancelCheck: 50 * time.Millisecond, NoPrune: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if m, err := other.CancelMessage(ctx, "x"); err != nil || m.State != core.StateCancelled {
		t.Fatalf("CancelMessage = %+v, %v", m, err)
	}
	if got, err := node.CancelledMessages(ctx, core.CancelCheck{Queue: "q", Created: published, IDs: []string{"x", "y"}}); err != nil || !got["x"] || len(got) != 1 {
		t.Fatalf("CancelledMessages right after the other process's CancelMessage = %v, %v; want x", got, err)
	}
}

// TestPruneBatches: a batch completed past the retention goes with its messages; a dead one
// stays, as does one completed recently; a dead batch whose messages were replayed in another
// batch goes (no message points at it), its messages stay.
func TestPruneBatches(t *testing.T) {
	t.Parallel()
	for _, kind := range idKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			testPruneBatches(t, kind.ids())
		})
	}
}

func testPruneBatches(t *testing.T, id func(string) string) {
	l := open(t, ledger.Options{Retention: time.Hour, PruneBatch: 3, NoPrune: true})
	ctx := context.Background()
	old, recent := time.Now().Add(-2*time.Hour), time.Now()
	life := func(batch string, names []string, end core.MessageState, at time.Time) {
		ids := idList(id, names...)
		l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: batch, IDs: ids, State: core.StateQueued, PublishedAt: at, UpdatedAt: at})
		l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: batch, IDs: ids, State: core.StateRunning, UpdatedAt: at.Add(time.Second), Runs: 1})
		l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: batch, IDs: ids, State: end, UpdatedAt: at.Add(2 * time.Second), Runs: 1})
	}
	life("done1", []string{"a1", "a2"}, core.StateCompleted, old)
	life("done2", []string{"b1", "b2", "b3"}, core.StateCompleted, old)
	life("done3", []string{"c1"}, core.StateCompleted, old)
	life("dead", []string{"d1", "d2"}, core.StateDead, old)
	life("fresh", []string{"f1"}, core.StateCompleted, recent)
	life("replayed", []string{"r1"}, core.StateDead, old)
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// r1 replayed through the outbox (no batch yet): it leaves its dead batch.
	l.RecordBatch(core.BatchEvent{Queue: "q", IDs: []string{id("r1")}, State: core.StateQueued, UpdatedAt: recent})
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if m := state(t, l, id("r1")); m.State != core.StateQueued || m.BatchID != "" {
		t.Fatalf("r1 after its replay = %+v; want queued without a batch", m)
	}
	n, err := l.Prune(ctx)
	if err != nil || n != 6 {
		t.Fatalf("Prune = %d, %v; want the 6 messages of the 3 old completed batches", n, err)
	}
	left, err := l.ListMessages(ctx, core.MessageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]core.MessageState{}
	for _, m := range left {
		got[m.ID] = m.State
	}
	want := map[string]core.MessageState{id("d1"): core.StateDead, id("d2"): core.StateDead, id("f1"): core.StateCompleted, id("r1"): core.StateQueued}
	if len(got) != len(want) {
		t.Fatalf("left %v; want %v", got, want)
	}
	for id, s := range want {
		if got[id] != s {
			t.Errorf("left %v; want %v", got, want)
			break
		}
	}
	var batches []string
	rows, err := testenv.PostgresPool(t).Query(ctx, `SELECT batch_id FROM `+l.Schema()+`.txmq_ledger_states ORDER BY batch_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	if rows.Err() != nil || len(batches) != 2 || batches[0] != "dead" || batches[1] != "fresh" {
		t.Errorf("batch rows left %v, %v; want dead and fresh", batches, rows.Err())
	}
}

// TestBatchLife: a message takes its batch's state; one staged in a transaction (no batch)
// takes the batch of its first run; a cancelled one keeps its cancel through its batch's
// retry, and takes the batch's completion unless a node left it out of the run.
func TestBatchLife(t *testing.T) {
	t.Parallel()
	for _, kind := range idKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			testBatchLife(t, kind.ids())
		})
	}
}

func testBatchLife(t *testing.T, id func(string) string) {
	l := open(t, ledger.Options{NoPrune: true})
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	rec := func(batch string, names []string, s core.MessageState, sec int) {
		t.Helper()
		l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: batch, IDs: idList(id, names...), State: s, PublishedAt: at(sec), UpdatedAt: at(sec), Runs: 1})
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rec("", []string{"s1", "s2"}, core.StateQueued, 1) // staged in a transaction
	rec("B", []string{"s1", "s2"}, core.StateRunning, 2)
	if m := state(t, l, id("s1")); m.State != core.StateRunning || m.BatchID != "B" || !m.PublishedAt.Equal(at(1)) {
		t.Fatalf("s1 after the relay's batch ran = %+v; want running in B, published at %v", m, at(1))
	}
	rec("C", []string{"c1", "c2", "c3"}, core.StateQueued, 3)
	for _, name := range []string{"c1", "c2"} {
		if _, err := l.CancelMessage(ctx, id(name)); err != nil {
			t.Fatal(err)
		}
	}
	rec("C", []string{"c1", "c2", "c3"}, core.StateRetry, 4) // c1 and c2 were in the run
	if m := state(t, l, id("c1")); m.State != core.StateCancelled {
		t.Fatalf("c1 after its batch's retry = %+v; want cancelled", m)
	}
	rec("", []string{"c2"}, core.StateCancelled, 5) // the next run leaves c2 out
	rec("C", []string{"c1", "c3"}, core.StateCompleted, 6)
	for name, want := range map[string]core.MessageState{"c1": core.StateCompleted, "c2": core.StateCancelled, "c3": core.StateCompleted} {
		if m := state(t, l, id(name)); m.State != want {
			t.Errorf("%s = %+v; want %s", name, m, want)
		}
	}
	if got, err := l.ListMessages(ctx, core.MessageFilter{Queue: "q", State: core.StateCompleted}); err != nil || len(got) != 2 {
		t.Errorf("completed = %+v, %v; want c1 and c3", got, err)
	}
}

// TestMessagesOfBatches: a message made by core.NewID costs no row of its own (its batch's row
// holds it), unless its batch's ids were made too far apart; a message replayed in another
// batch is in the newest batch that holds it, in lookups and listings alike (once), for both
// kinds of ids.
func TestMessagesOfBatches(t *testing.T) {
	t.Parallel()
	for _, kind := range idKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			id := kind.ids()
			l := open(t, ledger.Options{NoPrune: true})
			ctx := context.Background()
			t0 := time.Now().Add(-time.Minute)
			rec := func(batch string, ids []string, s core.MessageState, at time.Time) {
				t.Helper()
				l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: batch, IDs: ids, State: s, PublishedAt: at, UpdatedAt: at, Runs: 1})
				if err := l.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ids := idList(id, "m1", "m2", "m3")
			rec("B1", ids, core.StateQueued, t0)
			rec("B1", ids, core.StateDead, t0.Add(time.Second))
			rows := func() int {
				var n int
				if err := testenv.PostgresPool(t).QueryRow(ctx, `SELECT count(*) FROM `+l.Schema()+`.txmq_ledger`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			wantRows := 3
			if kind.name == "NewID ids" {
				wantRows = 0
			}
			if n := rows(); n != wantRows {
				t.Fatalf("%d message rows after a batch's life; want %d", n, wantRows)
			}
			rec("B2", ids[:2], core.StateQueued, t0.Add(2*time.Second)) // m1 and m2 replayed
			rec("B2", ids[:2], core.StateCompleted, t0.Add(3*time.Second))
			for name, want := range map[string]string{"m1": "B2", "m2": "B2", "m3": "B1"} {
				if m := state(t, l, id(name)); m.BatchID != want {
					t.Errorf("%s = %+v; want in batch %s", name, m, want)
				}
			}
			list, err := l.ListMessages(ctx, core.MessageFilter{Queue: "q"})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]core.MessageState{}
			for _, m := range list {
				got[m.ID] = m.State
			}
			if len(list) != 3 || got[id("m1")] != core.StateCompleted || got[id("m3")] != core.StateDead {
				t.Errorf("listing = %+v; want m1 and m2 completed, m3 dead, each once", list)
			}
			if dead, err := l.ListMessages(ctx, core.MessageFilter{State: core.StateDead}); err != nil || len(dead) != 1 || dead[0].ID != id("m3") {
				t.Errorf("dead across queues = %+v, %v; want m3 only", dead, err)
			}
			// Ids made an hour and more apart: rows of their own, found as well.
			wide := []string{farID(2 * time.Hour), core.NewID()}
			before := rows()
			rec("W", wide, core.StateRunning, time.Now())
			if n := rows(); n != before+2 {
				t.Errorf("%d message rows after a batch of ids made 2 hours apart; want %d", n, before+2)
			}
			for _, w := range wide {
				if m := state(t, l, w); m.BatchID != "W" || m.State != core.StateRunning {
					t.Errorf("%s = %+v; want running in W", w, m)
				}
			}
		})
	}
}

// farID returns an id of core.NewID's form made ago before now.
func farID(ago time.Duration) string { return ledger.OldID(time.Now().Add(-ago).UnixMilli()) }
