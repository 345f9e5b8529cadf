package sqljobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/backendtest"
)

// TestGroupedPublishesEachStored publishes many plain batches at once, to two queues, with
// priorities, fairness keys and a delay: they share statements, each call returns nil, and
// every batch is stored with its own columns.
func TestGroupedPublishesEachStored(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	tr := &countingTracer{}
	be := w.backendOn(w.pool(tr), &Options{SettleWindow: 50 * time.Millisecond})
	const n = 60 // the batches GroupedPublishes publishes
	published := func() {
		if stmts := tr.n.Load(); stmts >= n/2 {
			t.Errorf("%d concurrent publishes ran %d statements; want them grouped", n, stmts)
		}
	}
	backendtest.GroupedPublishes(t, be, published, func() ([]backendtest.GroupedRow, error) {
		rows, err := w.admin.Query(ctxT(t), fmt.Sprintf(`SELECT batch_id, queue, body, messages, priority, lead_us, fair_key FROM %s.txmq_jobs`, pgx.Identifier{w.schema}.Sanitize()))
		if err != nil {
			return nil, err
		}
		var (
			out  []backendtest.GroupedRow
			r    backendtest.GroupedRow
			prio int16
		)
		_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Queue, &r.Body, &r.Messages, &prio, &r.LeadUs, &r.FairKey}, func() error {
			c := r
			c.Prio, c.Body = int(prio), bytes.Clone(r.Body) // pgx may reuse the buffer
			out = append(out, c)
			return nil
		})
		return out, err
	})
}

// TestPublishRound runs rounds of the publish group directly: one multi-row statement stores
// them all; a round the database refuses for one batch's value stores the others, each alone,
// and only that batch is rejected; a round whose statement fails otherwise gives every
// member its error, classified as a lone publish's.
func TestPublishRound(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	tr := &countingTracer{}
	be := w.backendOn(w.pool(tr), nil)
	round := func(ids ...string) []*pubReq {
		reqs := make([]*pubReq, len(ids))
		for i, id := range ids {
			reqs[i] = &pubReq{b: core.OutgoingBatch{ID: id, Queue: "pr" + id[:1], Messages: 1}, body: []byte("{}")}
		}
		return reqs
	}

	before := tr.n.Load()
	if err := be.execPublishes(ctxT(t), round("a1", "a2", "b1", "a3")); err != nil {
		t.Fatal(err)
	}
	if stmts := tr.n.Load() - before; stmts != 1 {
		t.Errorf("a round of 4 ran %d statements, want 1", stmts)
	}
	if a, b := depth(t, be, "pra").Ready, depth(t, be, "prb").Ready; a != 3 || b != 1 {
		t.Fatalf("ready %d and %d, want 3 and 1", a, b)
	}

	reqs := round("c1", "c\x00bad", "c3")
	if err := be.execPublishes(ctxT(t), reqs); err != nil {
		t.Fatalf("a round with one refused value: %v; want each batch's own outcome", err)
	}
	for i, r := range reqs {
		err := be.call.Explain("publish", r.err)
		if rej := errors.Is(err, core.ErrRejected) && !errors.Is(err, core.ErrBackendUnavailable); rej != (i == 1) {
			t.Errorf("batch %q: %v", r.b.ID, err)
		}
	}
	if got := depth(t, be, "prc").Ready; got != 2 {
		t.Fatalf("ready %d of queue prc, want the 2 valid batches", got)
	}

	// Without its table every statement fails: each concurrent publish returns the error
	// naming its own batch, neither rejected nor an outage.
	if _, err := w.admin.Exec(ctxT(t), fmt.Sprintf(`ALTER TABLE %s.txmq_jobs RENAME TO txmq_jobs_gone`, pgx.Identifier{w.schema}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			id := fmt.Sprint("gone-", i)
			err := be.Publish(ctxT(t), core.OutgoingBatch{ID: id, Queue: "prg", Body: []byte("{}"), Messages: 1})
			if err == nil || errors.Is(err, core.ErrRejected) || errors.Is(err, core.ErrBackendUnavailable) || !strings.Contains(err.Error(), id) {
				t.Errorf("publish %s without the table: %v", id, err)
			}
		})
	}
	wg.Wait()
}

// TestGroupedPublishDeadline: a round's statement is cancelled when a member's context ends,
// and every member gets that member's reason (a deadline: an outage, as for a lone publish);
// a publish whose context already ended stores nothing.
func TestGroupedPublishDeadline(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := be.Publish(ctx, core.OutgoingBatch{ID: "x", Queue: "pd", Body: []byte("{}"), Messages: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("publish with an ended context: %v", err)
	}
	past, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop()
	reqs := []*pubReq{
		{b: core.OutgoingBatch{ID: "p1", Queue: "pd", Messages: 1}, body: []byte("{}"), ctx: context.Background()},
		{b: core.OutgoingBatch{ID: "p2", Queue: "pd", Messages: 1}, body: []byte("{}"), ctx: past},
	}
	// A member whose time ran out before the round ran is left out, told so; the rest is stored.
	if err := be.execPublishes(context.Background(), reqs); err != nil || reqs[0].err != nil {
		t.Fatalf("a round with a member out of time: %v, first member %v; want it stored", err, reqs[0].err)
	}
	if err := be.call.Explain("publish", reqs[1].err); !errors.Is(err, core.ErrBackendUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the member out of time: %v; want the timeout, an outage as for a lone publish", err)
	}
	if d := depth(t, be, "pd"); d != (core.Depth{Ready: 1}) {
		t.Fatalf("depth = %+v, want only p1 stored", d)
	}
	// A member giving up while the statement runs cuts it short: every member gets its reason.
	tx, err := w.admin.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctxT(t), fmt.Sprintf(`LOCK TABLE %s.txmq_jobs IN EXCLUSIVE MODE`, pgx.Identifier{w.schema}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	soon, stop2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer stop2()
	reqs = []*pubReq{
		{b: core.OutgoingBatch{ID: "p3", Queue: "pd", Messages: 1}, body: []byte("{}"), ctx: context.Background()},
		{b: core.OutgoingBatch{ID: "p4", Queue: "pd", Messages: 1}, body: []byte("{}"), ctx: soon},
	}
	err = be.call.Explain("publish", be.execPublishes(context.Background(), reqs)) // waits on the lock
	if !errors.Is(err, core.ErrBackendUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a round cut short by a member's deadline: %v; want the timeout, an outage as for a lone publish", err)
	}
	_ = tx.Rollback(context.Background())
	if d := depth(t, be, "pd"); d != (core.Depth{Ready: 1}) {
		t.Fatalf("depth = %+v, want only p1 stored", d)
	}
}
