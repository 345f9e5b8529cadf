package backendtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
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
