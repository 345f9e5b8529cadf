package appdb

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatementPlans: the store's claim, key and held-key statements read index ranges, never
// the whole table, at 0 and 20,000 rows that are not due (a backlog held by backoff), before
// and after ANALYZE (EXPLAIN QUERY PLAN: no SCAN of txmq_outbox).
func TestStatementPlans(t *testing.T) {
	t.Parallel()
	db, err := OpenDB(filepath.Join(t.TempDir(), "plan.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	stmts := map[string]struct {
		q    string
		args []any
	}{
		"probe": {`SELECT EXISTS (` + dueSubquery + `)`, []any{5, 0, 5, 0}},
		"claim": {`UPDATE ` + outboxTable + ` SET claim_token = 1, claim_next = next_attempt_at, next_attempt_at = 9
			WHERE id IN (SELECT id FROM (` + dueSubquery + `) ORDER BY id LIMIT 100) RETURNING id`, []any{5, 0, 5, 0}},
		"settle": {`UPDATE ` + outboxTable + ` SET next_attempt_at = claim_next, claim_token = NULL, claim_next = NULL
			WHERE id IN (?, ?) AND claim_token = ?`, []any{1, 2, 3}},
		"key":   {`SELECT queue, order_key, id FROM ` + outboxTable + ` WHERE queue = ? AND order_key = ? AND id <= ? UNION ALL SELECT queue, order_key, id FROM ` + outboxTable + ` WHERE queue = ? AND order_key = ? AND id <= ? ORDER BY id`, []any{"q", "k", 5, "q", "j", 5}},
		"holds": {`SELECT EXISTS (SELECT 1 FROM ` + outboxTable + ` WHERE queue = ? AND order_key = ?)`, []any{"q", "k"}},
		"held":  {`SELECT DISTINCT queue, order_key FROM ` + outboxTable + ` WHERE queue IN (?) AND order_key IS NOT NULL`, []any{"q"}},
	}
	check := func(stage string) {
		t.Helper()
		for name, s := range stmts {
			rows, err := db.Query("EXPLAIN QUERY PLAN "+s.q, s.args...)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			_ = rows.Close()
			for _, d := range plan {
				if strings.HasPrefix(d, "SCAN "+outboxTable) {
					t.Errorf("%s, %s scans the table: %s", stage, name, strings.Join(plan, "; "))
				}
			}
		}
	}
	check("empty")
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20000 {
		if _, err := tx.Exec(`INSERT INTO `+outboxTable+` (queue, batch_id, body, created_at, next_attempt_at, order_key) VALUES ('q', 'b', x'00', 1, 9999999999999999, ?)`, i%50); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	check("20k rows not due")
	if _, err := db.Exec("ANALYZE"); err != nil {
		t.Fatal(err)
	}
	check("20k rows not due, analyzed")
}
