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
	"github.com/txmq/txmq/txmqtest/backendtest"
)

// TestGroupedPublishesEachStored publishes many plain batches at once, to two queues, with
// priorities, fairness keys and a delay: each call returns nil and every batch is stored
// with its own columns.
func TestGroupedPublishesEachStored(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(&Options{SettleWindow: 50 * time.Millisecond})
	backendtest.GroupedPublishes(t, be, nil, func() ([]backendtest.GroupedRow, error) {
		return backendtest.SQLGroupedRows(w.admin.QueryContext(context.Background(), fmt.Sprintf(`SELECT batch_id, queue, body, messages, priority, lead_us, fair_key FROM %stxmq_jobs`, qualifier(w.schema))))
	})
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
