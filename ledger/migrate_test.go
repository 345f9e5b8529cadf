package ledger_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestMigrateLayout1: rows of layout 1 (one row per message with its state) read the same
// after migration 0003: a batch takes its messages' state, a cancelled message stays
// cancelled, a message without a batch keeps its own state, and the old completed batch is
// pruned with its messages.
func TestMigrateLayout1(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	ctx := context.Background()
	run := func(name string) {
		t.Helper()
		b, err := fs.ReadFile(ledger.Migrations(), name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, strings.ReplaceAll(string(b), "{{schema}}", pgx.Identifier{schema}.Sanitize())); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	run("0001_init.sql")
	run("0002_kept_batches.sql")
	old, recent := time.Now().Add(-48*time.Hour), time.Now().Add(-time.Minute)
	for _, r := range []struct {
		id, batch, state string
		at               time.Time
	}{
		{"r1", "B1", "retry", recent}, {"r2", "B1", "retry", recent}, {"r3", "B1", "cancelled", recent},
		{"c1", "B2", "completed", old}, {"c2", "B2", "completed", old},
		{"s1", "", "queued", recent},
	} {
		if _, err := pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, "txmq_ledger"}.Sanitize()+` (queue, id, batch_id, state, published_at, updated_at, runs, error)
VALUES ('q', $1, $2, $3, $4, $4, 2, 'boom')`, r.id, r.batch, r.state, r.at); err != nil {
			t.Fatal(err)
		}
	}
	run("0003_batch_states.sql")
	run("0004_batch_ids.sql")
	run("0005_cancel_scope.sql")
	l, err := ledger.New(pool, &ledger.Options{Schema: schema, NoPrune: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	for id, want := range map[string]core.MessageState{"r1": core.StateRetry, "r2": core.StateRetry, "r3": core.StateCancelled, "c1": core.StateCompleted, "s1": core.StateQueued} {
		m, err := l.GetMessage(ctx, id)
		if err != nil || m.State != want || m.Runs != 2 {
			t.Errorf("%s after the migration = %+v, %v; want %s after 2 runs", id, m, err, want)
		}
	}
	// The cancel of before migration 0005 applies to its batch and to batches made before it,
	// not to a later publish of its id.
	for _, c := range []struct {
		b    core.CancelCheck
		want bool
	}{
		{core.CancelCheck{Queue: "q", BatchID: "B1", Created: time.Now(), IDs: []string{"r1", "r3"}}, true},
		{core.CancelCheck{Queue: "q", BatchID: "copy", Created: recent, IDs: []string{"r1", "r3"}}, true},
		{core.CancelCheck{Queue: "q", BatchID: "later", Created: time.Now(), IDs: []string{"r1", "r3"}}, false},
	} {
		got, err := l.CancelledMessages(ctx, c.b)
		if err != nil || got["r3"] != c.want || got["r1"] {
			t.Errorf("CancelledMessages(%+v) after the migration = %v, %v; want r3 cancelled: %v", c.b, got, err, c.want)
		}
	}
	if n, err := l.Prune(ctx); err != nil || n != 2 {
		t.Errorf("Prune = %d, %v; want c1 and c2", n, err)
	}
}
