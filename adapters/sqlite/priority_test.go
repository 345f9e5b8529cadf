package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/txmq/txmq/adapters/sqlite/internal/migrate"
	"github.com/txmq/txmq/core"
)

// publishPrio publishes one batch of queue with priority p and lead p seconds.
func publishPrio(t *testing.T, be *Backend, queue, id string, p int, delay time.Duration) {
	t.Helper()
	err := be.Publish(context.Background(), core.OutgoingBatch{ID: id, Queue: queue, Body: []byte(id), Messages: 1,
		Delay: delay, Priority: p, Lead: core.PriorityLead(p, time.Second)})
	if err != nil {
		t.Fatalf("publish %s: %v", id, err)
	}
}

// claimIDs returns the batch ids of cs in order.
func claimIDs(cs []*core.Claim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// TestPrioritizedClaimOrder: a prioritized queue's claim takes ready batches by due time
// minus lead (higher first, within the aging bound), one slot at a time and several at once;
// a retried batch keeps its lead; a delayed high batch is never early; a plain queue in the
// same request goes by due time only.
func TestPrioritizedClaimOrder(t *testing.T) {
	t.Parallel()
	be := newWorld(t).backend(nil)
	prio := func(q string, free int) core.QueueSlots {
		return core.QueueSlots{Queue: q, Free: free, Prioritized: true}
	}
	publishPrio(t, be, "p", "low", 0, 0)
	publishPrio(t, be, "p", "mid", 5, 0)
	publishPrio(t, be, "p", "high", 9, 0)
	publishPrio(t, be, "p", "later", 9, time.Hour) // not due: never claimed early
	publish(t, be, "plain", "plain-1", 0)
	publish(t, be, "plain", "plain-2", 0)

	cs := fetch(t, be, 0, prio("p", 1))
	if got := claimIDs(cs); !slices.Equal(got, []string{"high"}) {
		t.Fatalf("first claim of one slot = %v; want [high]", got)
	}
	// Retry high at once: it keeps its lead, so it ranks ahead of mid and low again.
	if err := be.Retry(context.Background(), cs[0], nil, 0); err != nil {
		t.Fatalf("retry: %v", err)
	}
	cs = fetch(t, be, 0, prio("p", 3), all("plain"))
	got := claimIDs(cs)
	var p, plain []string
	for _, id := range got {
		if strings.HasPrefix(id, "plain") {
			plain = append(plain, id)
		} else {
			p = append(p, id)
		}
	}
	if !slices.Equal(p, []string{"high", "mid", "low"}) || !slices.Equal(plain, []string{"plain-1", "plain-2"}) {
		t.Fatalf("claim of both queues = %v; want high, mid, low of p (the retried high first) and plain-1, plain-2 of plain", got)
	}
}

// TestPrioritizedClaimManyQueues: a request with more prioritized queues than one pick
// statement may join (ten parts each, SQLite's 500-term compound limit) claims from all.
func TestPrioritizedClaimManyQueues(t *testing.T) {
	t.Parallel()
	// The heaviest claim this backend makes: under -race on a loaded machine it outlasted the
	// default QueryTimeout (10 s) once; this test is about what it claims, not how fast.
	be := newWorld(t).backend(&Options{QueryTimeout: time.Minute})
	const n = 60 // 600 parts
	var slots []core.QueueSlots
	for i := range n {
		q := fmt.Sprintf("q%02d", i)
		publishPrio(t, be, q, q+"-a", i%10, 0)
		slots = append(slots, core.QueueSlots{Queue: q, Free: 1, Prioritized: true})
	}
	cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n1", Queues: slots, Lease: 10 * time.Second, Max: n})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(cs) != n {
		t.Fatalf("fetch of %d prioritized queues claimed %d batches; want %d", n, len(cs), n)
	}
}

// TestNewNeedsPriorityMigration: New on a file migrated before the priority columns existed
// says to run Migrate, naming the missing migration; Migrate adds them.
func TestNewNeedsPriorityMigration(t *testing.T) {
	t.Parallel()
	db, err := OpenDB(filepath.Join(t.TempDir(), "old.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	init, err := fs.ReadFile(Migrations(), "0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate.Run(context.Background(), db, Component, fstest.MapFS{"0001_init.sql": {Data: init}}); err != nil {
		t.Fatalf("migrating to 0001 only: %v", err)
	}
	_, err = New(context.Background(), db, &Options{ReapInterval: -1})
	missing := missingVersions([]int{1})
	if !slices.Contains(missing, 3) {
		t.Fatalf("missing versions of a file at migration 1 = %v; want the priority migration, 3, among them", missing)
	}
	if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), fmt.Sprint(missing)) || !strings.Contains(err.Error(), "sqlite.Migrate") {
		t.Fatalf("New on a file at migration 1 = %v; want ErrInvalidConfig naming migrations %v and saying to run sqlite.Migrate", err, missing)
	}
	if err := Migrate(context.Background(), db, nil); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	be, err := New(context.Background(), db, &Options{ReapInterval: -1})
	if err != nil {
		t.Fatalf("New after Migrate: %v", err)
	}
	_ = be.Close()
}
