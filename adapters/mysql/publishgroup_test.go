package mysql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/groupcommit"
)

// TestGroupedPublishesEachStored publishes many plain batches at once, to two queues, with
// priorities, fairness keys and a delay: each call returns nil and every batch is stored
// with its own columns.
func TestGroupedPublishesEachStored(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(&Options{SettleWindow: 50 * time.Millisecond})
	const n = 60
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			b := core.OutgoingBatch{ID: fmt.Sprint("pg-", i), Queue: []string{"pga", "pgb"}[i%2], Body: fmt.Appendf(nil, "body-%d", i),
				Messages: 1 + i%3, Priority: i % 10, Lead: time.Duration(i%10) * time.Second, FairKey: fmt.Sprint("k", i%4)}
			if i == n-1 {
				b.NotBefore = time.Now().Add(time.Hour)
			}
			errs[i] = be.Publish(context.Background(), b)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("publish %d: %v", i, err)
		}
	}
	if d := depth(t, be, "pga"); d != (core.Depth{Ready: n / 2}) {
		t.Errorf("pga depth = %+v, want %d ready", d, n/2)
	}
	if d := depth(t, be, "pgb"); d != (core.Depth{Ready: n/2 - 1, Delayed: 1}) {
		t.Errorf("pgb depth = %+v, want %d ready and 1 delayed", d, n/2-1)
	}
	rows, err := w.admin.QueryContext(context.Background(), fmt.Sprintf(`SELECT batch_id, queue, body, messages, priority, lead_us, fair_key FROM %stxmq_jobs`, qualifier(w.schema)))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var (
			id, queue, fair string
			body            []byte
			msgs, prio      int
			lead            int64
		)
		if err := rows.Scan(&id, &queue, &body, &msgs, &prio, &lead, &fair); err != nil {
			t.Fatal(err)
		}
		var i int
		if _, err := fmt.Sscanf(id, "pg-%d", &i); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%s body-%d %d %d %d k%d", []string{"pga", "pgb"}[i%2], i, 1+i%3, i%10, int64(i%10)*1e6, i%4)
		if got := fmt.Sprintf("%s %s %d %d %d %s", queue, body, msgs, prio, lead, fair); got != want {
			t.Errorf("row %s = %q, want %q", id, got, want)
		}
		seen++
	}
	if err := rows.Err(); err != nil || seen != n {
		t.Fatalf("read %d rows, want %d: %v", seen, n, err)
	}
}

// TestPublishRound runs rounds of the publish group directly: one multi-row statement stores
// them all; a round the server refuses for one batch's value stores the others, each alone,
// and only that batch is rejected; a round whose statement fails otherwise gives every
// member its error, classified as a lone publish's.
func TestPublishRound(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	round := func(ids ...string) []*groupcommit.Publish {
		reqs := make([]*groupcommit.Publish, len(ids))
		for i, id := range ids {
			reqs[i] = &groupcommit.Publish{Batch: core.OutgoingBatch{ID: id, Queue: "pr" + id[:1], Messages: 1}, Body: []byte("{}")}
		}
		return reqs
	}
	if err := be.publishes.Run(context.Background(), round("a1", "a2", "b1", "a3")); err != nil {
		t.Fatal(err)
	}
	if a, b := depth(t, be, "pra").Ready, depth(t, be, "prb").Ready; a != 3 || b != 1 {
		t.Fatalf("ready %d and %d, want 3 and 1", a, b)
	}

	// An id over the column's 255 bytes (Publish refuses it before the server sees it): strict
	// mode refuses the value.
	reqs := round("c1", "c"+strings.Repeat("x", 300), "c3")
	if err := be.publishes.Run(context.Background(), reqs); err != nil {
		t.Fatalf("a round with one refused value: %v; want each batch's own outcome", err)
	}
	for i, r := range reqs {
		err := be.call.Explain("publish", r.Err())
		if rej := errors.Is(err, core.ErrRejected) && !errors.Is(err, core.ErrBackendUnavailable); rej != (i == 1) {
			t.Errorf("batch %d: %v", i, err)
		}
	}
	if got := depth(t, be, "prc").Ready; got != 2 {
		t.Fatalf("ready %d of queue prc, want the 2 valid batches", got)
	}

	if _, err := w.admin.ExecContext(context.Background(), fmt.Sprintf(`RENAME TABLE %[1]stxmq_jobs TO %[1]stxmq_jobs_gone`, qualifier(w.schema))); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			id := fmt.Sprint("gone-", i)
			err := be.Publish(context.Background(), core.OutgoingBatch{ID: id, Queue: "prg", Body: []byte("{}"), Messages: 1})
			if err == nil || errors.Is(err, core.ErrRejected) || errors.Is(err, core.ErrBackendUnavailable) || !strings.Contains(err.Error(), id) {
				t.Errorf("publish %s without the table: %v", id, err)
			}
		})
	}
	wg.Wait()
}
