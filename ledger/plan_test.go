package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// TestStatementPlans EXPLAINs the ledger's statements on its tables after ANALYZE, with 30,000
// messages in 300 batches on 3 queues (most completed, some cancelled; a third with ids a
// caller chose, which have rows, the others found through their batch), behind the plan guard
// they run behind, and fails on a sequential scan or a whole-index scan (no index condition,
// not a partial index, not the first rows under a Limit) of txmq_ledger or
// txmq_ledger_states: each must have an index access to take.
func TestStatementPlans(t *testing.T) {
	t.Parallel()
	l, pool := newTestLedger(t, &Options{NoPrune: true, FlushInterval: time.Hour, Mode: true})
	ctx := context.Background()
	old := time.Now().Add(-48 * time.Hour)
	var someIDs []string
	for i := range 300 {
		ids := make([]string, 100)
		for j := range ids {
			ids[j] = core.NewID()
			if i%3 == 2 { // ids a caller chose: rows of their own
				ids[j] = fmt.Sprint("order-", i, "-", j)
			}
		}
		someIDs = append(someIDs, ids[0])
		at := old.Add(time.Duration(i) * time.Second)
		ev := core.BatchEvent{Queue: fmt.Sprint("q", i%3), BatchID: fmt.Sprint("b", i), IDs: ids, PublishedAt: at}
		for k, s := range []core.MessageState{core.StateQueued, core.StateRunning, core.StateCompleted} {
			if s == core.StateCompleted && i%10 == 0 {
				s = core.StateDead
			}
			ev.State, ev.UpdatedAt = s, at.Add(time.Duration(k)*time.Millisecond)
			l.RecordBatch(ev)
		}
		if i%7 == 0 {
			l.RecordBatch(core.BatchEvent{Queue: ev.Queue, IDs: ids[:1], State: core.StateCancelled, UpdatedAt: at})
		}
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Cancels made through CancelMessage (a cancel scope each), one of them published again.
	for i := 5; i < 40; i += 7 {
		id := someIDs[i]
		if _, err := l.exec(ctx, l.cancelSQL(), id, idTime(id), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	l.RecordBatch(core.BatchEvent{Queue: "q2", BatchID: "again", IDs: someIDs[5:6], State: core.StateQueued, UpdatedAt: time.Now(), PublishedAt: time.Now()})
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE `+l.table+`; ANALYZE `+l.states+`; ANALYZE `+l.kept); err != nil {
		t.Fatal(err)
	}

	type stmt struct {
		name string
		sql  string
		args []any
	}
	var stmts []stmt
	// The grouped write: loose events, a publish, a run of a batch published elsewhere, a
	// settle, ledger mode's statements.
	fresh := func(n int) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = core.NewID()
		}
		return ids
	}
	now := time.Now()
	events := []core.BatchEvent{
		{Queue: "q0", IDs: fresh(100), State: core.StateQueued, UpdatedAt: now},
		{Queue: "q1", BatchID: "new-stored", IDs: fresh(100), State: core.StateQueued, UpdatedAt: now},
		{Queue: "q2", BatchID: "new-run", IDs: fresh(100), State: core.StateRunning, UpdatedAt: now},
		{Queue: "q0", BatchID: "b3", IDs: someIDs[3:4], State: core.StateCompleted, UpdatedAt: now},
	}
	b := &pgx.Batch{}
	l.queueLoose(b, loose(events))
	rows := batchRows(events)
	l.queueAttach(b, rows)
	l.queueStates(b, rows)
	l.batchEvents(b, events)
	for i, q := range b.QueuedQueries {
		stmts = append(stmts, stmt{fmt.Sprint("write ", i), q.SQL, q.Arguments})
	}
	id := someIDs[42]
	stmts = append(stmts,
		stmt{"get", l.getSQL(), []any{id, idTime(id)}},
		stmt{"get (a caller's id)", l.getSQL(), []any{someIDs[2], (*time.Time)(nil)}},
		stmt{"cancel", l.cancelSQL(), []any{id, idTime(id), now}},
		stmt{"cancelled of a batch", l.cancelledSQL(), []any{"q0", someIDs[:100]}},
		stmt{"cancels, first read", l.cancelsSQL(false), nil},
		stmt{"cancels, next read", l.cancelsSQL(true), []any{now.Add(-time.Minute)}},
		stmt{"terminal", l.terminalSQL(), []any{[]string{"q0", "q1"}, someIDs[:2], []*time.Time{idTime(someIDs[0]), idTime(someIDs[1])}}},
		stmt{"cancel scopes", l.cancelScopesSQL(), []any{[]string{"q0", "q1"}, someIDs[:2]}},
	)
	for _, f := range []core.MessageFilter{
		{Queue: "q1"},
		{Queue: "q1", State: core.StateDead, Since: old, Until: now},
		{},
		{State: core.StateCompleted, Limit: 10},
	} {
		q, args := l.listQuery(f)
		stmts = append(stmts, stmt{fmt.Sprintf("list %+v", f), q, args})
	}
	msgs, batches, orphans := l.pruneSQL()
	for _, s := range []stmt{{"prune messages", msgs, nil}, {"prune batches", batches, nil}, {"prune orphans", orphans, nil}} {
		s.args = []any{now.Add(-24 * time.Hour), 1000}
		stmts = append(stmts, s)
	}

	// txmq_ledger_batches (ledger mode's kept batches) is left out: empty here.
	tables := map[string]bool{"txmq_ledger": true, "txmq_ledger_states": true}
	partial := map[string]bool{"txmq_ledger_cancelled": true, "txmq_ledger_prune": true, "txmq_ledger_cancels": true}
	for _, s := range stmts {
		var out string
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, planGuard); err != nil {
			t.Fatal(err)
		}
		err = tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+s.sql, s.args...).Scan(&out)
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatalf("%s: EXPLAIN: %v\n%s", s.name, err, s.sql)
		}
		var plan any
		if err := json.Unmarshal([]byte(out), &plan); err != nil {
			t.Fatal(err)
		}
		var seq []string
		var walk func(any, string)
		walk = func(v any, parent string) {
			switch v := v.(type) {
			case map[string]any:
				rel := fmt.Sprint(v["Relation Name"])
				switch v["Node Type"] {
				case "Seq Scan":
					if tables[rel] {
						seq = append(seq, "a sequential scan of "+rel)
					}
				case "Index Scan", "Index Only Scan":
					// A partial index's predicate is its condition; under a Limit, the scan reads
					// the first rows in the index's order.
					if _, ok := v["Index Cond"]; !ok && tables[rel] && !partial[fmt.Sprint(v["Index Name"])] && parent != "Limit" {
						seq = append(seq, "a whole-index scan of "+rel+" ("+fmt.Sprint(v["Index Name"])+")")
					}
				}
				for _, c := range v {
					walk(c, fmt.Sprint(v["Node Type"]))
				}
			case []any:
				for _, c := range v {
					walk(c, parent)
				}
			}
		}
		walk(plan, "")
		if len(seq) > 0 {
			t.Errorf("%s: %s\n%s\n%s", s.name, strings.Join(seq, ", "), s.sql, out)
		}
	}
}
