package backendtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// Publish publishes a one-message batch id to queue, its body "body-"+id, due after delay.
func Publish(t testing.TB, be core.Backend, queue, id string, delay time.Duration) {
	t.Helper()
	err := be.Publish(context.Background(), core.OutgoingBatch{ID: id, Queue: queue, Body: []byte("body-" + id), Delay: delay, Messages: 1})
	if err != nil {
		t.Fatalf("publish %s: %v", id, err)
	}
}

// PublishN publishes n batches to queue (Publish), ids queue-0 to queue-(n-1), due now.
func PublishN(t testing.TB, be core.Backend, queue string, n int) {
	t.Helper()
	for i := range n {
		Publish(t, be, queue, fmt.Sprintf("%s-%d", queue, i), 0)
	}
}

// Fetch claims for node n1 with Wait 0 and the given lease (10 s when 0).
func Fetch(t testing.TB, be core.Backend, lease time.Duration, slots ...core.QueueSlots) []*core.Claim {
	t.Helper()
	if lease == 0 {
		lease = 10 * time.Second
	}
	cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n1", Queues: slots, Lease: lease})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	return cs
}

// All is queue with unlimited free slots.
func All(queue string) core.QueueSlots { return core.QueueSlots{Queue: queue, Free: core.Unlimited} }

// Depth returns queue's depth counts.
func Depth(t testing.TB, be core.Backend, queue string) core.Depth {
	t.Helper()
	d, err := be.Depths(context.Background(), []string{queue})
	if err != nil {
		t.Fatalf("depths: %v", err)
	}
	return d[queue].Counts()
}

// PlanRows returns the table sizes a statement-plan test checks: the environment variable
// TXMQ_PLAN_ROWS (comma-separated row counts, e.g. 0,10000,1000000) when set, else defaults.
// A malformed value fails the test, naming the variable.
func PlanRows(t testing.TB, defaults ...int) []int {
	t.Helper()
	s := os.Getenv("TXMQ_PLAN_ROWS")
	if s == "" {
		return defaults
	}
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			t.Fatalf("TXMQ_PLAN_ROWS=%q: each size must be a row count of 0 or more (e.g. 0,10000,1000000)", s)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// FairRoundRobin checks a fair claim of several batches on a fresh queue of be: it goes round
// the keys, one batch per key per round, the next claim starting after the last key served;
// a key at its KeyLimit is passed over (core.FairSharer, with KeyLimit).
func FairRoundRobin(t testing.TB, be core.Backend, queue string) {
	t.Helper()
	ctx := context.Background()
	pub := func(id, key string) {
		t.Helper()
		if err := be.Publish(ctx, core.OutgoingBatch{ID: id, Queue: queue, Body: []byte(id), FairKey: key}); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
	}
	for i := range 6 {
		pub(fmt.Sprint("a", i), "a")
	}
	pub("b0", "b")
	pub("c0", "c")
	ids := func(cs []*core.Claim) string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.ID
		}
		return strings.Join(out, " ")
	}
	fair := core.QueueSlots{Queue: queue, Free: 4, Fair: true}
	if got := ids(Fetch(t, be, time.Minute, fair)); got != "a0 b0 c0 a1" {
		t.Fatalf("a claim of 4 across keys a (6 batches), b and c (1 each) handed out %q; want a0 b0 c0 a1", got)
	}
	fair.KeyLimit = 3 // key a runs 2 and may take 1 more; b and c have nothing ready
	if got := ids(Fetch(t, be, time.Minute, fair)); got != "a2" {
		t.Fatalf("with KeyLimit 3 and 2 of key a running, a claim handed out %q; want a2", got)
	}
}

// GroupedRow is one jobs-table row GroupedPublishes reads back.
type GroupedRow struct {
	ID, Queue      string
	Body           []byte
	Messages, Prio int
	LeadUs         int64
	FairKey        string
}

// GroupedPublishes publishes 60 plain batches of be at once (a grouping backend stores them
// with shared statements), to queues pga and pgb, with priorities, fairness keys and, for the
// last, a delay: each call must return nil and every batch be stored with its own columns.
// published, when not nil, runs once the publishes returned, before the checks (a test that
// counts statements reads its count there); rows reads the jobs table's rows.
func GroupedPublishes(t testing.TB, be core.Backend, published func(), rows func() ([]GroupedRow, error)) {
	t.Helper()
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
	if published != nil {
		published()
	}
	if d := Depth(t, be, "pga"); d != (core.Depth{Ready: n / 2}) {
		t.Errorf("pga depth = %+v, want %d ready", d, n/2)
	}
	if d := Depth(t, be, "pgb"); d != (core.Depth{Ready: n/2 - 1, Delayed: 1}) {
		t.Errorf("pgb depth = %+v, want %d ready and 1 delayed", d, n/2-1)
	}
	got, err := rows()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		var i int
		if _, err := fmt.Sscanf(r.ID, "pg-%d", &i); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%s body-%d %d %d %d k%d", []string{"pga", "pgb"}[i%2], i, 1+i%3, i%10, int64(i%10)*1e6, i%4)
		if have := fmt.Sprintf("%s %s %d %d %d %s", r.Queue, r.Body, r.Messages, r.Prio, r.LeadUs, r.FairKey); have != want {
			t.Errorf("row %s = %q, want %q", r.ID, have, want)
		}
	}
	if len(got) != n {
		t.Fatalf("read %d rows, want %d", len(got), n)
	}
}

// SQLGroupedRows reads GroupedPublishes' rows from a database/sql query selecting batch_id,
// queue, body, messages, priority, lead_us and fair_key, in that order.
func SQLGroupedRows(rs *sql.Rows, err error) ([]GroupedRow, error) {
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []GroupedRow
	for rs.Next() {
		var r GroupedRow
		if err := rs.Scan(&r.ID, &r.Queue, &r.Body, &r.Messages, &r.Prio, &r.LeadUs, &r.FairKey); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rs.Err()
}
