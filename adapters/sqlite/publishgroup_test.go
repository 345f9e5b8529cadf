package sqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestGroupedPublishesEachStored publishes many plain batches at once (they share INSERTs),
// to two queues, with priorities, fairness keys and a delay: each call returns nil, every
// batch is stored with its own columns, and the delayed one is not due.
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
	if d := depth(t, be, "pgb"); d != (core.Depth{Ready: n/2 - 1, Delayed: 1}) {
		t.Errorf("pgb depth = %+v, want %d ready and 1 delayed", d, n/2-1)
	}
	rows, err := be.DB().QueryContext(context.Background(), `SELECT batch_id, queue, body, messages, priority, lead_us, fair_key FROM txmq_jobs`)
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
